// Per-kernel wall-time profile, on when INFINIPOT_PROFILE=1. Each launch is then followed
// by clFinish, so the figures are exact per kernel but the run is slower: a tool for
// finding where time goes, not for reporting speed.
#pragma once
#include <CL/cl.h>
#include <string>

namespace infinipot::cl {

bool profiling_enabled();
// Wraps one launch: call before enqueueing; the returned token ends it.
double profile_now();
void profile_record(cl_command_queue q, const std::string& name, double t_start);
// Table of kernels by total time, printed to stderr.
void profile_report();

}  // namespace infinipot::cl
