package config

import (
	"bytes"
	"regexp"
	"strconv"
)

// yaml.v3 reports a syntax error at the line where the enclosing block starts, not where
// the mistake is: a bad indent on line 5 of a server is reported on line 2, the line of
// "servers:". The mistake is where the document stops parsing, so yamlSyntaxError looks
// for the first prefix of the file, from the reported line on, that fails with the same
// message: the last line of that prefix is the line at fault.

// yamlErrorPattern splits yaml.v3's "yaml: line N: message".
var yamlErrorPattern = regexp.MustCompile(`^yaml: (?:line (\d+): )?(.*)$`)

// maxErrorScan bounds the prefixes tried, so a huge file costs a bounded number of parses.
const maxErrorScan = 2000

// yamlSyntaxError returns the line of a YAML syntax error and its message without
// yaml.v3's prefix.
func yamlSyntaxError(data []byte, err error) (int, string) {
	m := yamlErrorPattern.FindStringSubmatch(err.Error())
	if m == nil {
		return 0, err.Error()
	}
	reported, _ := strconv.Atoi(m[1])
	msg := m[2]
	ends := lineEnds(data)
	from := max(reported, 1)
	for k := from; k <= len(ends) && k < from+maxErrorScan; k++ {
		_, perr := decodeYAML(data[:ends[k-1]])
		if perr == nil {
			continue
		}
		if pm := yamlErrorPattern.FindStringSubmatch(perr.Error()); pm != nil && pm[2] == msg {
			return k, msg
		}
	}
	return reported, msg
}

// lineEnds returns, for each line, the offset just past it (its newline included).
func lineEnds(data []byte) []int {
	var ends []int
	for i := 0; i < len(data); {
		j := bytes.IndexByte(data[i:], '\n')
		if j < 0 {
			ends = append(ends, len(data))
			break
		}
		i += j + 1
		ends = append(ends, i)
	}
	return ends
}

// tabIndented reports whether line (1-based) of data is indented with a tab.
func tabIndented(data []byte, line int) bool {
	ends := lineEnds(data)
	if line < 1 || line > len(ends) {
		return false
	}
	start := 0
	if line > 1 {
		start = ends[line-2]
	}
	text := data[start:ends[line-1]]
	indent := text[:len(text)-len(bytes.TrimLeft(text, " \t"))]
	return bytes.IndexByte(indent, '\t') >= 0
}
