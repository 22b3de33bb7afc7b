// The audit artifact's JSON (contracts/audit.schema.json): key order fixed; summary and verdict
// computed here from the rows or findings.
#include <nlohmann/json.hpp>

#include "ws1/audit.hpp"

namespace ws1 {
namespace {

using json = nlohmann::ordered_json;

json workload(const std::optional<WorkloadRef>& w) {
  if (!w) return nullptr;
  return json{{"path", w->path},
              {"workload_id", w->workload_id},
              {"manifest_version", w->manifest_version},
              {"identity_sha256", w->identity_sha256}};
}

std::string_view build_verdict(const AuditSummary& s) {
  if (s.non_conformant > 0) return "non_conformant";
  if (s.not_checked > 0) return "not_checked";
  return "conformant";
}

}  // namespace

std::string audit_json(const AuditArtifact& a) {
  json j;
  j["schema_version"] = a.schema_version;
  j["tool"] = json{{"name", a.tool.name},
                   {"version", a.tool.version},
                   {"source_commit", a.tool.source_commit},
                   {"source_dirty", a.tool.source_dirty ? json(*a.tool.source_dirty) : json(nullptr)}};
  j["checkout"] = a.checkout ? json{{"commit", a.checkout->commit}, {"dirty", a.checkout->dirty}} : json(nullptr);
  j["command"] = a.command;
  j["started"] = a.started;
  j["finished"] = a.finished;
  j["mode"] = a.mode;
  j["contract"] = a.contract ? json{{"path", a.contract->path},
                                    {"version", a.contract->version},
                                    {"sha256", a.contract->sha256}}
                             : json(nullptr);
  j["workloads"] = a.mode == "build" ? json{{"tiny", workload(a.tiny_workload)},
                                            {"probe", workload(a.probe_workload)}}
                                     : json(nullptr);
  json rows = json::array();
  for (const AuditRow& r : a.rows)
    rows.push_back(json{{"id", r.id},
                        {"title", r.title},
                        {"spec", r.spec},
                        {"status", audit_status_name(r.status)},
                        {"basis", r.basis},
                        {"details", r.details}});
  j["rows"] = rows;
  if (a.repo) {
    const RepoScan& s = *a.repo;
    json by_file = json::object();
    for (const auto& [file, c] : s.tolerance_by_file)
      by_file[file] = json{{"atol", c.atol}, {"rtol", c.rtol}, {"total", c.total()}};
    json findings = json::array();
    for (const RepoFinding& f : s.findings)
      findings.push_back(json{{"rule", f.rule},
                              {"file", f.file},
                              {"line", f.line},
                              {"column", f.column},
                              {"message", f.message},
                              {"snippet", f.snippet}});
    j["repo"] = json{{"root", s.root},
                     {"files_scanned", s.files_scanned},
                     {"skipped", s.skipped},
                     {"tolerance_literals", {{"atol", s.tolerance_total.atol},
                                             {"rtol", s.tolerance_total.rtol},
                                             {"total", s.tolerance_total.total()},
                                             {"by_file", by_file}}},
                     {"findings", findings}};
    json by_rule = json::object();
    for (const RepoRule& r : repo_rules()) by_rule[std::string(r.id)] = 0;
    for (const RepoFinding& f : s.findings) by_rule[f.rule] = by_rule[f.rule].get<std::int64_t>() + 1;
    j["summary"] = json{{"findings", s.findings.size()}, {"by_rule", by_rule}};
    j["verdict"] = s.findings.empty() ? "conformant" : "non_conformant";
  } else {
    j["repo"] = nullptr;
    const AuditSummary s = summarize(a.rows);
    j["summary"] = json{{"conformant", s.conformant},
                        {"exception_declared", s.exception_declared},
                        {"non_conformant", s.non_conformant},
                        {"not_checked", s.not_checked},
                        {"total", s.total}};
    j["verdict"] = build_verdict(s);
  }
  return j.dump(2, ' ', false, json::error_handler_t::replace) + "\n";
}

}  // namespace ws1
