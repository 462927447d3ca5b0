// Declarations only: the driver comes from libFuzzer's runtime.
#include "CFuzzerDriver.h"
