/* examples/common/stop_signal.h: stopping a training loop cleanly on SIGINT
 * or SIGTERM, shared by the examples' `train` commands.
 *
 *   catch_stop_signals();                 before the loop
 *   while (... && !stop_signal) step();   the step in flight always finishes
 *   if (stop_signal) { save a checkpoint; return 128 + stop_signal; }
 *
 * Invariant: the handler only sets stop_signal, so a signal never cuts a
 * step, a save or a file in half; the loop decides where to stop.  A second
 * signal has its default effect (the process ends; a checkpoint being
 * written is then left as it was, since saves are crash-safe).
 *
 * The including file defines _XOPEN_SOURCE 700 (SA_RESTART, SA_RESETHAND)
 * before its first #include. */
#ifndef EXAMPLES_STOP_SIGNAL_H
#define EXAMPLES_STOP_SIGNAL_H

#include <signal.h>
#include <string.h>

static volatile sig_atomic_t stop_signal; /* SIGINT or SIGTERM once received */

static inline void on_stop_signal(int sig)
{
    stop_signal = sig;
}

/* From here on SIGINT and SIGTERM ask the loop to stop after its step; a
 * second one has its default effect (SA_RESETHAND).  A signal the caller
 * ignores (a shell's background job ignores SIGINT) stays ignored. */
static inline void catch_stop_signals(void)
{
#ifdef __wasi__
    /* WebAssembly (make wasm): WASI delivers no signal, none to catch */
#else
    const int sigs[2] = {SIGINT, SIGTERM};
    for (int i = 0; i < 2; i++) {
        struct sigaction sa, old;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = on_stop_signal;
        sigemptyset(&sa.sa_mask);
        sa.sa_flags = SA_RESTART | SA_RESETHAND;
        if (sigaction(sigs[i], NULL, &old) == 0 && old.sa_handler != SIG_IGN) sigaction(sigs[i], &sa, NULL);
    }
#endif
}

/* "SIGINT" or "SIGTERM", for the message that says where the run stopped. */
static inline const char *stop_signal_name(int sig)
{
    return sig == SIGINT ? "SIGINT" : "SIGTERM";
}

#endif
