// Unit tests for petal_tokenizer.
#include "tokenizer/tokenizer.h"

#include <gtest/gtest.h>

TEST(TokenizerTest, Placeholder) { SUCCEED(); }
