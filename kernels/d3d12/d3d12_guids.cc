// Defines the IID_* objects that vkd3d's headers only declare. Exactly one
// translation unit may do this. On Windows they come from dxguid.lib (and
// __uuidof needs no object at all).
#ifndef _WIN32
#define INITGUID
#endif
#include "kernels/d3d12/d3d12_api.h"
