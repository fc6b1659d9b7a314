/* attograd_nn.h: layers built from the primitive ops (attention, Add&Norm,
 * transformer blocks).  Included by attograd.h. */
#ifndef ATTOGRAD_NN_H
#define ATTOGRAD_NN_H
#endif
