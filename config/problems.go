package config

import "fmt"

// HasErrors reports whether any problem is an error rather than a warning.
func HasErrors(problems []Problem) bool {
	for _, p := range problems {
		if p.Severity == SeverityError {
			return true
		}
	}
	return false
}

// problemList collects problems that share a file and, optionally, a server.
type problemList struct {
	file     string
	server   string
	problems []Problem
}

func (l *problemList) errorf(line int, field, format string, args ...any) {
	l.add(SeverityError, line, field, format, args...)
}

// envErrorf adds an error that setting a variable clears (Problem.Environment).
func (l *problemList) envErrorf(line int, field, format string, args ...any) {
	l.add(SeverityError, line, field, format, args...)
	l.problems[len(l.problems)-1].Environment = true
}

func (l *problemList) warnf(line int, field, format string, args ...any) {
	l.add(SeverityWarning, line, field, format, args...)
}

func (l *problemList) add(sev Severity, line int, field, format string, args ...any) {
	l.problems = append(l.problems, Problem{
		Severity: sev,
		File:     l.file,
		Line:     line,
		Server:   l.server,
		Field:    field,
		Message:  fmt.Sprintf(format, args...),
	})
}

func (l *problemList) hasErrors() bool { return HasErrors(l.problems) }
