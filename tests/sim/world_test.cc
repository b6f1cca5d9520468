#include <gtest/gtest.h>
#include "redlock/testing.h"
TEST(World, placeholder) {}
