#include <gtest/gtest.h>
#include "scenario.h"
TEST(Harness, placeholder) {}
