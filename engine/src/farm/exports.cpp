// Scheduler templates for a job: Open Job Description and Slurm.
#include <corridorkey/check.h>
#include <corridorkey/job.h>

#include <yaml-cpp/yaml.h>

#include <set>
#include <locale>
#include <sstream>

CORRIDORKEY_NAMESPACE_BEGIN

namespace {

/// One word for /bin/sh whatever it holds (quotes, $(), spaces, newlines): single quotes,
/// with each ' written as '\''. Nothing inside single quotes is expanded by the shell.
std::string shell_quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

/// Open Job Description expands {{...}} in every argument, and has no escape for it.
void check_no_format_string(const std::string& what, const std::string& value) {
  CK_CHECK(value.find("{{") == std::string::npos && value.find("}}") == std::string::npos,
           ConfigError, what, " '", value, "' contains '{{' or '}}', which Open Job Description "
           "would read as a format string; rename it");
}

/// True when `s` is valid UTF-8 (no overlong forms, surrogates or code points past U+10FFFF).
bool valid_utf8(const std::string& s) {
  for (size_t i = 0; i < s.size();) {
    const auto c = static_cast<unsigned char>(s[i]);
    size_t n = 0;
    unsigned cp = 0;
    if (c < 0x80) n = 1, cp = c;
    else if (c >= 0xC2 && c <= 0xDF) n = 2, cp = c & 0x1Fu;
    else if (c >= 0xE0 && c <= 0xEF) n = 3, cp = c & 0x0Fu;
    else if (c >= 0xF0 && c <= 0xF4) n = 4, cp = c & 0x07u;
    else return false;
    if (i + n > s.size()) return false;
    for (size_t k = 1; k < n; ++k) {
      const auto b = static_cast<unsigned char>(s[i + k]);
      if ((b & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (b & 0x3Fu);
    }
    if ((n == 3 && cp < 0x800) || (n == 4 && (cp < 0x10000 || cp > 0x10FFFF)) ||
        (cp >= 0xD800 && cp <= 0xDFFF))
      return false;
    i += n;
  }
  return true;
}

/// A YAML document is Unicode text: a name that is not UTF-8 cannot be written into one
/// without changing it (yaml-cpp would put U+FFFD in its place, and the task would then
/// name a clip that does not exist). Refused, naming the path, as an input error.
void check_utf8(const std::string& what, const std::string& path, const std::string& value) {
  CK_CHECK(valid_utf8(value), IoError, path, ": ", what, " is not valid UTF-8, which an Open Job "
           "Description template cannot hold; rename it (a Slurm export takes any bytes)");
}

/// OpenJD step names: 1-64 characters, no control characters; made unique.
std::string step_name(const std::string& clip, std::set<std::string>& used) {
  std::string n = "key-";
  for (unsigned char c : clip) n += (c < 0x20 || c == 0x7f) ? '_' : static_cast<char>(c);
  if (n.size() > 60) n.resize(60);
  std::string u = n;
  for (int k = 2; !used.insert(u).second; ++k) u = n + "-" + std::to_string(k);
  return u;
}

}  // namespace

std::string export_openjd(const JobSpec& job, const JobFrames& jf, const std::string& cli) {
  check_utf8("the job file path", job.file, job.file);
  check_utf8("the job name", job.file, job.name);
  check_utf8("the corridorkey-engine path", cli, cli);
  for (size_t i = 0; i < jf.clip_names.size(); ++i)
    check_utf8("the clip folder name", jf.clip_paths[i], jf.clip_paths[i]);
  YAML::Emitter e;
  // Every string scalar double-quoted: a clip named 010, on, yes or 1.5 stays a string
  // ("String required" from `openjd check` otherwise, and 010 read as 8 or 10 elsewhere).
  e.SetStringFormat(YAML::DoubleQuoted);
  e << YAML::BeginMap;
  e << YAML::Key << "specificationVersion" << YAML::Value << "jobtemplate-2023-09";
  e << YAML::Key << "name" << YAML::Value << job.name;
  e << YAML::Key << "steps" << YAML::Value << YAML::BeginSeq;
  check_no_format_string("the job file path", job.file);
  if (!job.options.model.tune_cache.empty()) {
    check_utf8("the tune_cache path", job.file, job.options.model.tune_cache);
    check_no_format_string("the tune_cache path", job.options.model.tune_cache);
  }
  check_no_format_string("the corridorkey-engine path", cli);
  std::set<std::string> used;
  for (size_t i = 0; i < jf.clip_names.size(); ++i) {
    const int n = static_cast<int>(plan_clip_chunks(jf, jf.clip_names[i], 0, job.chunk_size).size());
    check_no_format_string("clip name", jf.clip_names[i]);
    // The command runs without a shell (command + args), so paths need no quoting; the
    // step name is display text, kept to what OpenJD allows.
    e << YAML::BeginMap;
    e << YAML::Key << "name" << YAML::Value << step_name(jf.clip_names[i], used);
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
      << "--clip" << jf.clip_names[i] << "--chunk" << ("{{Task.Param.Chunk}}/" + std::to_string(n));
    if (!job.pinned_precision.empty()) e << "--precision" << job.pinned_precision;
    if (!job.options.model.tune_cache.empty()) e << "--tune-cache" << job.options.model.tune_cache;
    e << "--quiet" << YAML::EndSeq;
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
  // #SBATCH lines are not shell words: sbatch splits them at whitespace and a newline would
  // end the comment and start a shell command. The log folder must be plain; everything on
  // the command line is quoted.
  for (char c : log_dir)
    CK_CHECK(c != '\n' && c != '\r' && c != ' ' && c != '\t' && c != '%', ConfigError,
             "slurm export: the log folder '", log_dir, "' contains whitespace, a newline or '%', "
             "which #SBATCH --output cannot hold; pass --log-dir with a plain path");
  std::ostringstream s;
  s.imbue(std::locale::classic());  // numbers in every locale
  s << "#!/bin/bash\n"
    << "# Slurm array job written by corridorkey-engine job export: one array task per chunk.\n"
    << "# Each task is idempotent (finished frames are skipped), so requeues are safe.\n"
    << "#SBATCH --job-name=" << job.name << "\n"
    << "#SBATCH --array=1-" << n << "\n"
    << "#SBATCH --ntasks=1\n"
    << "#SBATCH --output=" << log_dir << "/" << job.name << "-%A_%a.out\n";
  if (job.options.model.device.rfind("cuda", 0) == 0) s << "#SBATCH --gres=gpu:1\n";
  s << "set -euo pipefail\n"
    << "exec " << shell_quote(cli) << " job run " << shell_quote(job.file) << " --chunk \"${SLURM_ARRAY_TASK_ID}/"
    << n << "\""
    << (job.pinned_precision.empty() ? "" : " --precision " + shell_quote(job.pinned_precision))
    << (job.options.model.tune_cache.empty() ? "" : " --tune-cache " + shell_quote(job.options.model.tune_cache))
    << " --quiet\n";
  return s.str();
}

CORRIDORKEY_NAMESPACE_END
