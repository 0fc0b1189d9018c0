#pragma once
#include "core/pools/kv_pool.h"
