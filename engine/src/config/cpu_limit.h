// The CPUs this process may use, which bound the `threads` option: on a farm slot or in a
// container that is the affinity mask and the cgroup CPU quota, not the host's core count
// (64 intra-op threads on a 4-CPU Slurm slot only thrash). Torch-free.
#pragma once

#include <string>

namespace corridorkey::config {

/// CPUs in the affinity mask (sched_getaffinity), bounded by the cgroup CPU quota of this
/// process's cgroup and its ancestors (cgroup v2 cpu.max, v1 cpu.cfs_quota_us), rounded up;
/// at least 1.
int usable_cpus();

/// CPUs a cgroup v2 cpu.max line allows ("150000 100000" -> 2, rounded up), 0 for none
/// ("max 100000") or text that does not parse.
int cpus_from_cpu_max(const std::string& text);

}  // namespace corridorkey::config
