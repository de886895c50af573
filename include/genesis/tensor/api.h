// Everything of the tensor layer in one include.
#pragma once

#include "genesis/core/error.h"

#include "genesis/tensor/creation.h"
#include "genesis/tensor/index.h"
#include "genesis/tensor/ops.h"
#include "genesis/tensor/promotion.h"
#include "genesis/tensor/shape_ops.h"
#include "genesis/tensor/tensor.h"
