// The stage timers' clock lives in the base folder (ck_base), so the apps share it too.
#pragma once

#include <corridorkey/base/timing.h>
