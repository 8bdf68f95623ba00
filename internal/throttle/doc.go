// Package throttle keeps a flood of one kind of event from becoming a flood
// of log lines: in each interval the first few are logged, the rest only
// counted, and the count is reported.
package throttle
