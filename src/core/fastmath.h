/* src/core/fastmath.h: moved to src/kernels/fastmath.h (the kernel room);
 * this name still works for the files that include it. */
#include "kernels/fastmath.h"
