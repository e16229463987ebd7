#include "cli/stop_signals.h"

#include <pthread.h>

#include <cstdio>
#include <thread>

namespace densa {

sigset_t block_stop_signals() {
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGUSR1);  // run_until_stop_signal wakes its waiter with it
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  std::signal(SIGPIPE, SIG_IGN);
  return stop_signals;
}

void run_until_stop_signal(const sigset_t& signals, const char* who, const std::function<void()>& run,
                           const std::function<void()>& stop) {
  std::thread waiter([&] {
    int sig = 0;
    sigwait(&signals, &sig);
    if (sig == SIGUSR1) return;  // woken after the server stopped on its own
    std::fprintf(stderr, "%s: %s, shutting down\n", who, sig == SIGINT ? "SIGINT" : "SIGTERM");
    stop();
  });
  run();
  pthread_kill(waiter.native_handle(), SIGUSR1);
  waiter.join();
}

}  // namespace densa
