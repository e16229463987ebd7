#pragma once
// How `densa serve` and `densa router` stop: SIGINT / SIGTERM end the HTTP server, which lets its
// open requests finish; the process then shuts the rest down in order.
#include <csignal>
#include <functional>

namespace densa {

// Blocks SIGINT, SIGTERM and SIGUSR1 in this thread and the threads it starts (call before any
// starts), so only the waiter of run_until_stop_signal receives them; ignores SIGPIPE (a client
// that went away is an error on its socket, not a signal).
sigset_t block_stop_signals();

// Runs `run` (an HTTP server's blocking loop) on this thread while a waiter thread sigwait()s
// on `signals`: SIGINT or SIGTERM logs "<who>: SIGINT|SIGTERM, shutting down" and calls `stop`,
// which makes `run` return. When `run` returns on its own, the waiter is woken with SIGUSR1 and
// leaves quietly. Returns once both are done.
void run_until_stop_signal(const sigset_t& signals, const char* who, const std::function<void()>& run,
                           const std::function<void()>& stop);

}  // namespace densa
