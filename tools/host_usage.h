// What this process has used of the host: peak resident memory and CPU time (Linux /proc and
// clock_gettime; 0 / false elsewhere). bench and nih put them in their rows.
#pragma once

namespace infinipot::cli {

// Peak resident memory of this process since the last reset_peak_rss() (VmHWM), in bytes;
// 0 where /proc is not there.
long long host_peak_rss();
// CPU seconds this process has used (all threads, user + system): unlike wall time, it does
// not grow while the process is paused (SIGSTOP) or waits for a busy machine.
double process_cpu_seconds();
// Resets VmHWM to the current RSS (Linux: /proc/self/clear_refs "5"), so a sweep reports
// each row's own peak; returns false where the kernel does not allow it.
bool reset_peak_rss();

}  // namespace infinipot::cli
