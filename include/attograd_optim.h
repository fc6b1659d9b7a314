/* attograd_optim.h: optimizers over an ag_store.  Included by attograd.h. */
#ifndef ATTOGRAD_OPTIM_H
#define ATTOGRAD_OPTIM_H
#endif
