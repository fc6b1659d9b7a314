/* attograd.h: the umbrella header that programs include.
 *
 *   attograd_core.h   tensors, the graph, backward, the store, gradcheck, threads
 *   attograd_nn.h     linear, attention, masks, Add&Norm, Transformer blocks, seq2seq
 *   attograd_optim.h  SGD, Adam, clipping, schedules
 *   attograd_io.h     safetensors checkpoints
 *   attograd_text.h   sentence pairs, vocabularies, BLEU
 *   attograd_viz.h    graph and attention pictures
 *   attograd_compat.h the deprecated names (AG_NO_DEPRECATED hides them)
 *
 * The tutorial is at the top of attograd_core.h. */
#ifndef ATTOGRAD_H
#define ATTOGRAD_H

#include "attograd_core.h"
#include "attograd_io.h"
#include "attograd_nn.h"
#include "attograd_optim.h"
#include "attograd_text.h"
#include "attograd_viz.h"
#include "attograd_compat.h"

#endif /* ATTOGRAD_H */
