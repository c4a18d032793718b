#include "bulk/dataset_manifest.h"

#include <simdjson.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>

#include "bulk/dataset_io.h"
#include "common/file_util.h"

namespace petal::bulk {

namespace fs = std::filesystem;

Status SaveManifest(const std::string& dir, const std::string& config,
                    const std::vector<Part>& parts) {
  std::string s = "{\"config\":" + JsonLiteral(config) + ",\"parts\":[";
  for (size_t i = 0; i < parts.size(); ++i) {
    const Part& p = parts[i];
    if (i) s += ',';
    s += "\n{\"file\":" + JsonLiteral(p.file) + ",\"first_row\":" + std::to_string(p.first_row) +
         ",\"rows\":" + std::to_string(p.rows) + ",\"written\":" + std::to_string(p.written) +
         ",\"skipped\":" + std::to_string(p.skipped) + "}";
  }
  s += "]}\n";
  const std::string tmp = dir + "/manifest.json.tmp";
  std::FILE* f = std::fopen(tmp.c_str(), "wb");
  if (!f) return Internal(tmp + ": cannot write");
  const bool ok = std::fwrite(s.data(), 1, s.size(), f) == s.size() && std::fflush(f) == 0 &&
                  fsync(fileno(f)) == 0;
  std::fclose(f);
  if (!ok) return Internal(tmp + ": write failed");
  std::error_code ec;
  fs::rename(tmp, dir + "/manifest.json", ec);
  return ec ? Internal("manifest: " + ec.message()) : Status::Ok();
}

StatusOr<std::vector<Part>> LoadManifest(const std::string& dir, const std::string& config) {
  PETAL_ASSIGN_OR_RETURN(std::string text, ReadFile(dir + "/manifest.json"));
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  std::string_view cfg;
  simdjson::dom::array arr;
  if (parser.parse(text).get(doc) != simdjson::SUCCESS ||
      doc["config"].get_string().get(cfg) != simdjson::SUCCESS ||
      doc["parts"].get_array().get(arr) != simdjson::SUCCESS) {
    return DataLoss(dir + "/manifest.json is not a Petal manifest");
  }
  if (cfg != config) {
    return FailedPrecondition(dir + " was made with other options or input; use the same " +
                              "command line to --resume, or remove the folder\n  it has: " +
                              std::string(cfg) + "\n  this run: " + config);
  }
  std::vector<Part> parts;
  for (auto e : arr) {
    Part p;
    std::string_view file;
    if (e["file"].get_string().get(file) != simdjson::SUCCESS ||
        e["first_row"].get_int64().get(p.first_row) != simdjson::SUCCESS ||
        e["rows"].get_int64().get(p.rows) != simdjson::SUCCESS ||
        e["written"].get_int64().get(p.written) != simdjson::SUCCESS ||
        e["skipped"].get_int64().get(p.skipped) != simdjson::SUCCESS) {
      return DataLoss(dir + "/manifest.json: a part entry is malformed");
    }
    p.file.assign(file);
    if (!fs::exists(dir + "/" + p.file)) return DataLoss(dir + "/" + p.file + " is missing");
    parts.push_back(std::move(p));
  }
  return parts;
}

PartCommitter::PartCommitter(std::string dir, std::string config, std::vector<Part> parts)
    : dir_(std::move(dir)),
      config_(std::move(config)),
      parts_(std::move(parts)),
      thread_([this] { Loop(); }) {}

PartCommitter::~PartCommitter() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

Status PartCommitter::Commit(std::unique_ptr<PartFile> file, Part part) {
  std::lock_guard<std::mutex> lock(mu_);
  PETAL_RETURN_IF_ERROR(error_);
  queue_.emplace_back(std::move(file), std::move(part));
  cv_.notify_all();
  return Status::Ok();
}

Status PartCommitter::Wait() {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [&] { return queue_.empty() && !busy_; });
  return error_;
}

void PartCommitter::Loop() {
  for (;;) {
    std::unique_ptr<PartFile> file;
    Part part;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
      if (queue_.empty()) return;
      file = std::move(queue_.front().first);
      part = std::move(queue_.front().second);
      queue_.pop_front();
      busy_ = error_.ok();
      if (!busy_) continue;  // after an error nothing more is recorded
    }
    Status s = file->Close();
    if (s.ok()) {
      parts_.push_back(part);
      s = SaveManifest(dir_, config_, parts_);
    }
    std::lock_guard<std::mutex> lock(mu_);
    if (!s.ok()) error_ = s;
    busy_ = false;
    cv_.notify_all();
  }
}

void RemoveParts(const std::string& dir) {
  std::error_code ec;
  fs::remove(fs::path(dir) / "manifest.json", ec);
  fs::remove_all(dir, ec);
}

}  // namespace petal::bulk
