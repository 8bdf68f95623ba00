package config

import (
	"errors"
	"math"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// durationForms is appended to every duration error so the fix is in the message.
const durationForms = "use Go syntax (30s, 2m, 1h30m), a number of seconds (30, 1.5) or ISO 8601 (PT30S, P0DT0H2M0S)"

var (
	secondsPattern = regexp.MustCompile(`^(\d+\.?\d*|\.\d+)$`)
	// isoPattern accepts weeks, days and a time part; years and months have no fixed length.
	isoPattern = regexp.MustCompile(`^P(?:(\d+(?:[.,]\d+)?)W)?(?:(\d+(?:[.,]\d+)?)D)?(?:T(?:(\d+(?:[.,]\d+)?)H)?(?:(\d+(?:[.,]\d+)?)M)?(?:(\d+(?:[.,]\d+)?)S)?)?$`)
)

// ParseDuration reads a duration in any of the forms the config accepts: Go syntax
// ("30s", "2m"), a bare number of seconds ("30", "1.5"), or an ISO 8601 duration
// ("PT30S", "P0DT0H0M30S", "P1D", "PT0.5S"). Negative durations are rejected. The error
// never repeats the input, so callers decide whether it is safe to show.
func ParseDuration(s string) (time.Duration, error) {
	s = strings.TrimSpace(s)
	switch {
	case s == "":
		return 0, errors.New("empty duration")
	case strings.HasPrefix(s, "-"):
		return 0, errors.New("negative duration")
	case secondsPattern.MatchString(s):
		f, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return 0, errors.New("not a number of seconds")
		}
		return fromSeconds(f)
	case s[0] == 'P' || s[0] == 'p':
		return parseISO(strings.ToUpper(s))
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, errors.New("not a recognised duration")
	}
	if d < 0 {
		return 0, errors.New("negative duration")
	}
	return d, nil
}

// parseISO reads the subset of ISO 8601 durations that have a fixed length.
func parseISO(s string) (time.Duration, error) {
	m := isoPattern.FindStringSubmatch(s)
	if m == nil || s == "P" || strings.HasSuffix(s, "T") {
		if strings.ContainsAny(strings.SplitN(s, "T", 2)[0], "YM") {
			return 0, errors.New("ISO 8601 years and months have no fixed length; use weeks, days or a time part")
		}
		return 0, errors.New("not a valid ISO 8601 duration")
	}
	units := []float64{7 * 24 * 3600, 24 * 3600, 3600, 60, 1}
	total := 0.0
	for i, part := range m[1:] {
		if part == "" {
			continue
		}
		f, err := strconv.ParseFloat(strings.Replace(part, ",", ".", 1), 64)
		if err != nil {
			return 0, errors.New("not a valid ISO 8601 duration")
		}
		total += f * units[i]
	}
	return fromSeconds(total)
}

func fromSeconds(f float64) (time.Duration, error) {
	ns := f * float64(time.Second)
	if math.IsNaN(ns) || math.IsInf(ns, 0) || ns >= math.MaxInt64 {
		return 0, errors.New("duration too long")
	}
	if ns < 0 {
		return 0, errors.New("negative duration")
	}
	return time.Duration(math.Round(ns)), nil
}
