// Loading one served model (see served_model.h).
#include "gateway/served_model.h"

#include <cstdlib>
#include <filesystem>
#include <string_view>

#include "model/router_folder.h"

namespace petal::gateway {
namespace {

// See ServedModel::token_vectors_f16. A replica that is down at start leaves float32 (exact).
bool TokenVectorsF16(const ServedModel& m) {
  if (const char* env = std::getenv("PETAL_TOKEN_VECTORS_F16"); env && *env) {
    return std::string_view(env) != "0";
  }
  StatusOr<v1::ModelInfoResponse> info = m.replicas->ModelInfo();
  return info.ok() && info->backend() == "cuda";
}

}  // namespace

StatusOr<ModelNames> NamesOf(const ModelOptions& o) {
  PETAL_ASSIGN_OR_RETURN(const ModelConfig config, LoadModelConfig(o.model_dir));
  std::filesystem::path p(o.model_dir);
  while (p.has_parent_path() && p.filename().empty()) p = p.parent_path();
  const std::string folder = p.filename().string();
  ModelNames n;
  n.name = o.model_name.empty() ? folder : o.model_name;
  n.task = config.task;
  for (const std::string& a : o.aliases) {
    if (!a.empty() && a != n.name) n.aliases.push_back(a);
  }
  if (folder != n.name) n.aliases.push_back(folder);
  return n;
}

StatusOr<std::unique_ptr<ServedModel>> LoadServedModel(const ModelOptions& o,
                                                       const ReplicaSettings& rs) {
  if (o.servers.empty()) {
    return InvalidArgument("servers: model '" + o.model_dir + "' needs at least one --server");
  }
  auto m = std::make_unique<ServedModel>();
  m->dir = o.model_dir;
  PETAL_ASSIGN_OR_RETURN(m->names, NamesOf(o));
  PETAL_ASSIGN_OR_RETURN(m->config, LoadModelConfig(o.model_dir));
  PETAL_ASSIGN_OR_RETURN(m->tokenizer, Tokenizer::FromModelDir(TransformerDir(o.model_dir)));
  if (m->config.task == ModelTask::kSparse) {
    PETAL_ASSIGN_OR_RETURN(m->static_query,
                           SparseStaticQuery::Load(o.model_dir, m->config.vocab_size));
  }
  PETAL_ASSIGN_OR_RETURN(m->prompts, Prompts::Load(o.model_dir));
  m->replicas = std::make_unique<ReplicaSet>(o.servers, rs.health_interval, rs.request_timeout,
                                             rs.flow, rs.reply_poll);
  if (m->config.task == ModelTask::kMultiVector) m->token_vectors_f16 = TokenVectorsF16(*m);
  return m;
}

}  // namespace petal::gateway
