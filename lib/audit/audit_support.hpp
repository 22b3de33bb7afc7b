// Internal: what the build rows share: their titles and spec sections, in table order.
#pragma once

#include <span>
#include <string_view>

#include "ws1/audit.hpp"

namespace ws1::audit_detail {

struct RowInfo {
  std::string_view id, title, spec;
};
// The eight rows of the build audit, in table order.
std::span<const RowInfo> row_infos();
// A row with id, title and spec filled in (status not_checked, no basis yet).
AuditRow make_row(std::string_view id);

}  // namespace ws1::audit_detail
