// Scheduler templates for a job: Open Job Description and Slurm.
#include <corridorkey/errors.h>
#include <corridorkey/job.h>

#include <yaml-cpp/yaml.h>

#include <sstream>

CORRIDORKEY_NAMESPACE_BEGIN

std::string export_openjd(const JobSpec& job, const JobFrames& jf, const std::string& cli) {
  YAML::Emitter e;
  e << YAML::BeginMap;
  e << YAML::Key << "specificationVersion" << YAML::Value << "jobtemplate-2023-09";
  e << YAML::Key << "name" << YAML::Value << job.name;
  e << YAML::Key << "steps" << YAML::Value << YAML::BeginSeq;
  for (size_t i = 0; i < jf.clip_names.size(); ++i) {
    const int n = static_cast<int>(plan_clip_chunks(jf, jf.clip_names[i], 0, job.chunk_size).size());
    // Step names: letters, digits, '-', '_' and spaces; clip names are folder names.
    e << YAML::BeginMap;
    e << YAML::Key << "name" << YAML::Value << ("key-" + jf.clip_names[i]);
    e << YAML::Key << "parameterSpace" << YAML::Value << YAML::BeginMap;
    e << YAML::Key << "taskParameterDefinitions" << YAML::Value << YAML::BeginSeq << YAML::BeginMap;
    e << YAML::Key << "name" << YAML::Value << "Chunk";
    e << YAML::Key << "type" << YAML::Value << "INT";
    e << YAML::Key << "range" << YAML::Value << ("1-" + std::to_string(n));
    e << YAML::EndMap << YAML::EndSeq << YAML::EndMap;
    e << YAML::Key << "script" << YAML::Value << YAML::BeginMap;
    e << YAML::Key << "actions" << YAML::Value << YAML::BeginMap;
    e << YAML::Key << "onRun" << YAML::Value << YAML::BeginMap;
    e << YAML::Key << "command" << YAML::Value << cli;
    e << YAML::Key << "args" << YAML::Value << YAML::Flow << YAML::BeginSeq << "job" << "run" << job.file
      << "--clip" << jf.clip_names[i] << "--chunk" << ("{{Task.Param.Chunk}}/" + std::to_string(n))
      << "--quiet" << YAML::EndSeq;
    e << YAML::EndMap << YAML::EndMap << YAML::EndMap;
    e << YAML::EndMap;
  }
  e << YAML::EndSeq << YAML::EndMap;
  return "# Open Job Description template written by corridorkey-engine job export\n" +
         std::string(e.c_str()) + "\n";
}

std::string export_slurm(const JobSpec& job, const JobFrames& jf, const std::string& cli,
                         const std::string& log_dir) {
  const int n = static_cast<int>(plan_chunks(jf, 0, job.chunk_size).size());
  std::ostringstream s;
  s << "#!/bin/bash\n"
    << "# Slurm array job written by corridorkey-engine job export: one array task per chunk.\n"
    << "# Each task is idempotent (finished frames are skipped), so requeues are safe.\n"
    << "#SBATCH --job-name=" << job.name << "\n"
    << "#SBATCH --array=1-" << n << "\n"
    << "#SBATCH --ntasks=1\n"
    << "#SBATCH --output=" << log_dir << "/" << job.name << "-%A_%a.out\n";
  if (job.engine.device.rfind("cuda", 0) == 0) s << "#SBATCH --gres=gpu:1\n";
  s << "set -euo pipefail\n"
    << "exec '" << cli << "' job run '" << job.file << "' --chunk \"${SLURM_ARRAY_TASK_ID}/" << n
    << "\" --quiet\n";
  return s.str();
}

CORRIDORKEY_NAMESPACE_END
