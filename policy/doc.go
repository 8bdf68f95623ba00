// Package policy decides, call by call, whether a tool call goes ahead: an
// ordered list of rules, each a CEL expression over who calls (principal),
// what (server, tool, original name, method) and with which arguments
// (args), and an action (allow, deny or ask). The first rule whose
// expression is true decides; no rule matching allows. Rules are compiled
// once per config (Compile), and evaluating one costs about a microsecond.
package policy
