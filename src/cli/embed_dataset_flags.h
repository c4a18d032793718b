// The dataset flags of `petal embed` (--input, --output, --shard, ...; bulk/embed_dataset.h).
// Thread-safety: called while the command line is set up.
#pragma once

#include <CLI/CLI.hpp>

#include <string>

#include "bulk/embed_dataset.h"

namespace petal::cli {

// The dataset flags (--input ...): embed_dataset.h.
inline void AddDatasetFlags(CLI::App* sub, bulk::DatasetOptions* d, std::string* shard,
                            std::string* gpus) {
  sub->add_option("--input", d->input, "Dataset to embed: .jsonl or .parquet (with --output)");
  sub->add_option("--output", d->output, "Where the embeddings go: .parquet or .npy (+ ids)");
  sub->add_option("--text-field", d->text_field, "--input: the text column")->capture_default_str();
  sub->add_option("--id-field", d->id_field, "--input: the id column ('' = the row number)")
      ->capture_default_str();
  sub->add_option("--on-error", d->on_error,
                  "--input: a bad row (missing or null text, past the model length) fails the run "
                  "or is skipped; either way it is reported with its id")
      ->check(CLI::IsMember({"fail", "skip"}))
      ->capture_default_str();
  sub->add_option("--shard", *shard, "--input: I/N, embed the I-th of N contiguous row ranges");
  sub->add_flag("--resume", d->resume, "--input: continue an interrupted run (OUTPUT.parts/)");
  sub->add_flag("--truncate", d->truncate, "--input: cut texts past the model length");
  sub->add_option("--dtype", d->dtype, "--input: embedding type in the output")
      ->check(CLI::IsMember({"float32", "float16", "int8"}))
      ->capture_default_str();
  sub->add_option("--rows-per-part", d->rows_per_part, "--input: rows per resumable part")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  sub->add_option("--batch-rows", d->batch_rows, "--input: rows per task")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  sub->add_option("--threads", d->threads, "--input: tasks in flight (0 = hardware threads)");
  sub->add_option("--server", d->servers,
                  "--input: embed on these servers (host:port, repeatable) instead of locally");
  sub->add_option("--gpus", *gpus, "--input: local CUDA engines on all|N|LIST devices");
  sub->add_flag("!--no-progress", d->progress, "--input: no progress bar or log lines");
  sub->add_flag("--fake-engine", d->fake_engine,
                "--input: a deterministic engine that computes nothing (tests; measuring the "
                "reading, tokenizing and writing path alone)");
}

}  // namespace petal::cli
