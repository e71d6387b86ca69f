// Render-farm jobs: a YAML description of clips + engine settings, split deterministically
// into chunks that a scheduler (Open Job Description / AWS Deadline Cloud, Slurm, OpenCue,
// Deadline 10) runs as independent tasks: `corridorkey-engine job run JOB --chunk I/N`.
//
// Thread-safety: load_job, job_frames, plan_* and export_* are pure and may be called from
// any thread. run_chunk is run_inference (pipeline.h) and follows its rules.
#pragma once

#include <corridorkey/export.h>
#include <corridorkey/options.h>
#include <corridorkey/pipeline.h>

#include <string>
#include <vector>

CORRIDORKEY_NAMESPACE_BEGIN

struct JobClip {
  std::string path;    // clip folder
  std::string frames;  // "A-B[,C-D]" (1-based) or "" for all
};

struct JobSpec {
  std::string file;                 // the YAML it came from (absolute)
  int version = 1;                  // schema version
  std::string name = "corridorkey";
  std::string profile = "optimized";  // name or path the engine options start from
  std::vector<JobClip> clips;       // explicit clips, then every clip under clips_root
  std::string clips_root;
  Profile options;                  // profile + overrides + checkpoint/device/img_size/post knobs
  InferenceOptions inference;       // outputs, codecs, on_error, workers (paths unused)
  int chunk_size = 10;              // frames per chunk (scheduler tasks)
  /// Set by `job export` (and shown by `job plan`): the precision every chunk runs, so
  /// that chunks keyed on different node types do not flicker (bf16 against fp32 moves
  /// the matte). Exports pass it as `job run --precision`. Empty: options.model.model_precision.
  std::string pinned_precision;
};

/// Reads and validates a job file. ConfigError naming the file, line, key and problem.
CORRIDORKEY_API JobSpec load_job(const std::string& path);

/// One task: consecutive frames of one clip (1-based inclusive).
struct ChunkPart {
  std::string clip_path, clip_name;
  int first = 0, last = 0;
};
struct Chunk {
  int index = 0;  // 1-based
  int count = 0;  // of how many
  std::vector<ChunkPart> parts;
};

/// Frames of every clip (after per-clip ranges), in clip order; needs the clips on disk.
struct CORRIDORKEY_API JobFrames {
  std::vector<std::string> clip_paths, clip_names;
  std::vector<std::vector<int>> frames;  // 1-based frame numbers per clip
  /// Clips of clips_root that cannot be read (a symbolic link loop, no permission), left
  /// out: "<path>: <why>: clip skipped".
  std::vector<std::string> skipped;
  int total() const;
};
CORRIDORKEY_API JobFrames job_frames(const JobSpec& job);

/// Splits all frames, clip by clip, into n nearly equal consecutive chunks (every frame in
/// exactly one chunk; sizes differ by at most one). n = 0: ceil(total / chunk_size).
CORRIDORKEY_API std::vector<Chunk> plan_chunks(const JobFrames& frames, int n, int chunk_size);
/// The same for one clip's frames only (one scheduler step per clip).
CORRIDORKEY_API std::vector<Chunk> plan_clip_chunks(const JobFrames& frames, const std::string& clip_name, int n,
                                    int chunk_size);

/// Runs one chunk. Idempotent: frames whose outputs exist and read back are skipped, so a
/// rerun of a finished chunk does nothing and an interrupted one resumes. Builds one engine
/// for all the chunk's clip parts (the checkpoint is loaded once). Returns the summed
/// summary.
CORRIDORKEY_API JobSummary run_chunk(const JobSpec& job, const Chunk& chunk,
                                     const std::function<void(const PipelineEvent&)>& on_event = {});
/// The same with an engine the caller owns (a worker keying many chunks loads once).
CORRIDORKEY_API JobSummary run_chunk(BaseEngine& engine, const JobSpec& job, const Chunk& chunk,
                                     const std::function<void(const PipelineEvent&)>& on_event = {});

/// Scheduler templates. `cli` is the absolute path of corridorkey-engine to call.
CORRIDORKEY_API std::string export_openjd(const JobSpec& job, const JobFrames& frames, const std::string& cli);
CORRIDORKEY_API std::string export_slurm(const JobSpec& job, const JobFrames& frames, const std::string& cli,
                         const std::string& log_dir);

CORRIDORKEY_NAMESPACE_END
