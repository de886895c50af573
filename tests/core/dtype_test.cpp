#include "genesis/core/dtype.h"

#include <gtest/gtest.h>

#include <sstream>
#include <string>

#include "genesis/core/error.h"

namespace genesis {
namespace {

TEST(DTypeTest, Sizes) {
  EXPECT_EQ(dtype_size(DType::kBool), 1u);
  EXPECT_EQ(dtype_size(DType::kUInt8), 1u);
  EXPECT_EQ(dtype_size(DType::kInt8), 1u);
  EXPECT_EQ(dtype_size(DType::kInt16), 2u);
  EXPECT_EQ(dtype_size(DType::kFloat16), 2u);
  EXPECT_EQ(dtype_size(DType::kBFloat16), 2u);
  EXPECT_EQ(dtype_size(DType::kInt32), 4u);
  EXPECT_EQ(dtype_size(DType::kFloat32), 4u);
  EXPECT_EQ(dtype_size(DType::kInt64), 8u);
  EXPECT_EQ(dtype_size(DType::kFloat64), 8u);
  static_assert(dtype_size(DType::kFloat64) == 8, "dtype_size is usable at compile time");
}

TEST(DTypeTest, Kinds) {
  EXPECT_EQ(dtype_kind(DType::kBool), DTypeKind::kBool);
  EXPECT_EQ(dtype_kind(DType::kUInt8), DTypeKind::kUnsigned);
  EXPECT_EQ(dtype_kind(DType::kInt64), DTypeKind::kSigned);
  EXPECT_EQ(dtype_kind(DType::kBFloat16), DTypeKind::kFloat);
  EXPECT_TRUE(is_floating(DType::kFloat16));
  EXPECT_FALSE(is_floating(DType::kInt32));
  EXPECT_FALSE(is_floating(DType::kBool));
}

TEST(DTypeTest, CanonicalNamesRoundTrip) {
  for (int i = 0; i < kNumDTypes; ++i) {
    const auto t = static_cast<DType>(i);
    EXPECT_NE(dtype_name(t), "unknown");
    EXPECT_EQ(dtype_from_name(dtype_name(t)), t) << dtype_name(t);
    EXPECT_GT(dtype_size(t), 0u);
  }
  EXPECT_EQ(dtype_name(DType::kFloat32), "float32");
  EXPECT_EQ(dtype_name(DType::kBFloat16), "bfloat16");
  EXPECT_EQ(dtype_name(DType::kBool), "bool");
}

TEST(DTypeTest, Aliases) {
  EXPECT_EQ(dtype_from_name("float"), DType::kFloat32);
  EXPECT_EQ(dtype_from_name("double"), DType::kFloat64);
  EXPECT_EQ(dtype_from_name("half"), DType::kFloat16);
  EXPECT_EQ(dtype_from_name("fp16"), DType::kFloat16);
  EXPECT_EQ(dtype_from_name("bf16"), DType::kBFloat16);
  EXPECT_EQ(dtype_from_name("int"), DType::kInt32);
  EXPECT_EQ(dtype_from_name("long"), DType::kInt64);
  EXPECT_EQ(dtype_from_name("short"), DType::kInt16);
  EXPECT_EQ(dtype_from_name("byte"), DType::kUInt8);
  EXPECT_EQ(dtype_from_name("char"), DType::kInt8);
  EXPECT_EQ(dtype_from_name("torch.float16"), DType::kFloat16);
  EXPECT_EQ(dtype_from_name("genesis.int64"), DType::kInt64);
  EXPECT_EQ(dtype_from_name("torch.half"), DType::kFloat16);
}

TEST(DTypeTest, UnknownNameThrowsListingValidNames) {
  for (const char* name : {"float128", "Float32", "", "torch.", "complex64", "int4"}) {
    EXPECT_THROW(dtype_from_name(name), InvalidArgumentError) << "'" << name << "'";
  }
  try {
    dtype_from_name("float128");
    FAIL() << "expected InvalidArgumentError";
  } catch (const InvalidArgumentError& e) {
    EXPECT_NE(e.message().find("'float128'"), std::string::npos) << e.message();
    EXPECT_NE(e.message().find("bfloat16"), std::string::npos) << e.message();
  }
}

TEST(DTypeTest, StreamsWithPrefix) {
  std::ostringstream os;
  os << DType::kFloat32;
  EXPECT_EQ(os.str(), "genesis.float32");
}

}  // namespace
}  // namespace genesis
