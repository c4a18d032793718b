// The models of `petal gateway` / `petal serve` and the start-up hint (see gateway_flags.h).
#include "cli/gateway_flags.h"

#include <cstdio>

#include "cli/model_arg.h"
#include "cli/model_limits.h"
#include "common/log.h"
#include "gateway/task_routes.h"

namespace petal::cli {

bool ResolveModels(const char* command, const ModelFlags& flags, gateway::GatewayOptions* o) {
  if (flags.models.empty()) {
    std::fprintf(stderr, "%s: --model is required\n", command);
    return false;
  }
  if (!flags.names.empty() && flags.names.size() != flags.models.size()) {
    std::fprintf(stderr, "%s: %zu --model-name for %zu --model: give one per --model, in order\n",
                 command, flags.names.size(), flags.models.size());
    return false;
  }
  o->models.assign(flags.models.size(), {});
  for (size_t i = 0; i < flags.models.size(); ++i) {
    o->models[i].model_dir = flags.models[i];
    if (!flags.names.empty()) o->models[i].model_name = flags.names[i];
  }
  // The flag counts first: a mistake there is reported before any download.
  if (Status st = ApplyModelLimits(flags, o); !st.ok()) {
    std::fprintf(stderr, "%s: %s\n", command, st.message().c_str());
    return false;
  }
  for (gateway::ModelOptions& m : o->models) {
    std::string hub_name;  // ORG/NAME when the value was a hub id
    if (!ResolveModelFlag(command, &m.model_dir, &hub_name)) return false;
    if (m.model_name.empty()) {
      m.model_name = hub_name;
    } else if (!hub_name.empty()) {
      m.aliases.push_back(hub_name);  // a request may still name it by its hub id
    }
  }
  return true;
}

void LogGatewayStarted(const gateway::GatewayOptions& o, const gateway::Gateway& g) {
  std::string servers, models;
  for (const auto& m : o.models) {
    models += (models.empty() ? "" : ",") + m.model_dir;
    for (const auto& s : m.servers) servers += (servers.empty() ? "" : ",") + s;
  }
  if (o.models.empty()) {  // the single-model fields
    models = o.model_dir;
    for (const auto& s : o.servers) servers += (servers.empty() ? "" : ",") + s;
  }
  Log("info", "gateway listening",
      {{"listen", o.listen},
       {"port", std::to_string(g.port())},
       {"model", models},
       {"servers", servers},
       {"reply_poll_us", std::to_string(o.reply_poll_us)}});
  for (const auto& m : g.models()) {  // each model's own limits (model_limits.h)
    Log("info", "model limits",
        {{"model", m->name()},
         {"max_inputs", std::to_string(m->max_inputs)},
         {"chunk_max_sequences", std::to_string(m->chunk.max_seqs)},
         {"chunk_max_tokens", std::to_string(m->chunk.max_tokens)}});
  }
  std::string host = o.listen.substr(0, o.listen.rfind(':'));
  if (host.empty() || host == "0.0.0.0") host = "127.0.0.1";
  const std::string url = "http://" + host + ":" + std::to_string(g.port());
  const bool several = g.models().size() > 1;
  if (several)
    std::fprintf(stderr, "Petal is serving %zu models at %s\n", g.models().size(), url.c_str());
  for (const auto& m : g.models()) {
    const ModelTask task = m->config.task;
    const std::string_view noun = gateway::TaskNoun(task);
    const std::string what(noun.substr(0, noun.find(" (")));
    const std::string path(gateway::ExampleFor(task).path);
    const std::string body = gateway::ExampleBody(task, several ? m->name() : "");
    if (several) {
      std::fprintf(stderr, "  %s, %s:\n  ", m->name().c_str(), what.c_str());
    } else {
      std::fprintf(stderr, "Petal is serving %s at %s\n", what.c_str(), url.c_str());
    }
    std::fprintf(stderr, "  curl %s%s -H 'Content-Type: application/json' -d '%s'\n", url.c_str(),
                 path.c_str(), body.c_str());
  }
}

}  // namespace petal::cli
