//===- status_macros.h - absl::Status propagation helpers -------*- C++ -*-===//
//
// BT_RETURN_IF_ERROR(expr): returns the absl::Status of `expr` if it is not OK.
// BT_ASSIGN_OR_RETURN(lhs, expr): evaluates the absl::StatusOr `expr`; returns
// its status if not OK, else move-assigns its value to `lhs` (which may be a
// declaration, e.g. `auto x`).
//
// abseil 20220623 (Debian 12) ships no public macros for this; these follow
// the usual semantics of the internal ones.
//
//===----------------------------------------------------------------------===//

#ifndef BT_RUNTIME_STATUS_MACROS_H
#define BT_RUNTIME_STATUS_MACROS_H

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#define BT_STATUS_CONCAT_INNER_(a, b) a##b
#define BT_STATUS_CONCAT_(a, b) BT_STATUS_CONCAT_INNER_(a, b)

#define BT_RETURN_IF_ERROR(expr)                                               \
  do {                                                                         \
    ::absl::Status bt_status_ = (expr);                                        \
    if (!bt_status_.ok())                                                      \
      return bt_status_;                                                       \
  } while (0)

#define BT_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr)                              \
  auto tmp = (expr);                                                           \
  if (!tmp.ok())                                                               \
    return std::move(tmp).status();                                            \
  lhs = std::move(tmp).value()

#define BT_ASSIGN_OR_RETURN(lhs, expr)                                         \
  BT_ASSIGN_OR_RETURN_IMPL_(BT_STATUS_CONCAT_(bt_statusor_, __LINE__), lhs,    \
                            expr)

#endif // BT_RUNTIME_STATUS_MACROS_H
