// Package listing renders what the commands print for a person or a script
// to read: config problems, a line each and counted by severity, and the
// exported catalog of `tools`, as an aligned table or as JSON with the
// problems and notes beside it; and whether `import` writes its
// translation at all (ReportImport: only a result that would run once
// its variables are set). Text that came from a file or an
// upstream reaches a terminal inert: its control characters are written as
// visible escapes, never acted on.
package listing
