//===- BTDialect.h - the bt dialect -----------------------------*- C++ -*-===//
//
// Declares the bt dialect, its enums, attributes, types and op interfaces.
// Ops are in BTOps.h.
//
//===----------------------------------------------------------------------===//

#ifndef BT_DIALECT_BT_IR_BTDIALECT_H
#define BT_DIALECT_BT_IR_BTDIALECT_H

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/Interfaces/FunctionInterfaces.h"

#include "bt/Dialect/BT/IR/BTDialect.h.inc"
#include "bt/Dialect/BT/IR/BTEnums.h.inc"

#define GET_ATTRDEF_CLASSES
#include "bt/Dialect/BT/IR/BTAttrs.h.inc"

#define GET_TYPEDEF_CLASSES
#include "bt/Dialect/BT/IR/BTTypes.h.inc"

#include "bt/Dialect/BT/IR/BTInterfaces.h.inc"

#endif // BT_DIALECT_BT_IR_BTDIALECT_H
