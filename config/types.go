package config

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/big"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// Duration is a time.Duration written as a string with a unit: "30s",
// "1m", "17h".
type Duration struct{ time.Duration }

// UnmarshalJSON accepts a Go duration string. A bare number is refused:
// whether 60 means seconds or nanoseconds is a guess not worth making.
func (d *Duration) UnmarshalJSON(b []byte) error {
	if string(bytes.TrimSpace(b)) == "null" {
		return nil // as encoding/json does for its own types
	}
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("invalid duration %s: write it with a unit, like \"30s\" or \"1m\"", b)
	}
	v, err := time.ParseDuration(strings.TrimSpace(s))
	if err != nil {
		return fmt.Errorf("invalid duration %q", s)
	}
	d.Duration = v
	return nil
}

// MarshalJSON writes the duration as a string that UnmarshalJSON reads back.
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(d.String()) }

// Default prune limit, used when a source does not set prune.maxDeletes: one
// sync may delete DefaultMaxDeletes resources or DefaultMaxDeletesPercent
// percent of those the source owns, whichever is larger; more waits for an
// approval. It is the sync package's default, restated for the configuration.
const (
	DefaultMaxDeletes        = 10
	DefaultMaxDeletesPercent = 25
)

// MaxDeletes caps how many resources one sync of a source may delete before
// the deletion waits for approval: a count ("25") or a percentage of the
// resources the source owns ("25%"). The zero value (not set) is the default
// limit: DefaultMaxDeletes or DefaultMaxDeletesPercent, whichever is larger.
// "100%" lifts the limit.
type MaxDeletes struct {
	// Count is the limit when Percent is zero.
	Count int
	// Percent, from 1 to 100, is the limit as a share of the owned
	// resources. "0%" is kept as Count 0: both allow no deletion.
	Percent int
	// Set is false when the default limit applies.
	Set bool
}

// Allows reports whether deleting deletes of the owned resources is within
// the limit.
func (m MaxDeletes) Allows(deletes, owned int) bool {
	switch {
	case !m.Set:
		return deletes <= max(DefaultMaxDeletes, owned*DefaultMaxDeletesPercent/100)
	case m.Percent > 0:
		// Integer arithmetic: 25% of 10 allows 2, never 2.5 rounded up.
		return deletes*100 <= m.Percent*owned
	}
	return deletes <= m.Count
}

// String returns the limit as written ("25", "25%"), or the default.
func (m MaxDeletes) String() string {
	switch {
	case !m.Set:
		return fmt.Sprintf("default (%d or %d%%, whichever is larger)", DefaultMaxDeletes, DefaultMaxDeletesPercent)
	case m.Percent > 0:
		return strconv.Itoa(m.Percent) + "%"
	}
	return strconv.Itoa(m.Count)
}

// UnmarshalJSON accepts a whole number or a string holding a whole number
// or a percentage.
func (m *MaxDeletes) UnmarshalJSON(b []byte) error {
	const want = `must be a count like 25 or a percentage like "25%"`
	s := string(bytes.TrimSpace(b))
	if s == "null" {
		return nil // as encoding/json does for its own types
	}
	if strings.HasPrefix(s, `"`) {
		if err := json.Unmarshal(b, &s); err != nil {
			return fmt.Errorf("invalid value %s: %s", b, want)
		}
		s = strings.TrimSpace(s)
	}
	num, percent := strings.CutSuffix(s, "%")
	n, err := strconv.Atoi(strings.TrimSpace(num))
	switch {
	case err != nil:
		return fmt.Errorf("invalid value %q: %s", s, want)
	case n < 0:
		return fmt.Errorf("invalid value %q: must not be negative", s)
	case percent && n > 100:
		return fmt.Errorf("invalid value %q: a percentage must be between 0%% and 100%%", s)
	}
	*m = MaxDeletes{Set: true}
	if percent {
		m.Percent = n
	} else {
		m.Count = n
	}
	return nil
}

// MarshalJSON writes the limit as UnmarshalJSON reads it, null for none.
func (m MaxDeletes) MarshalJSON() ([]byte, error) {
	switch {
	case !m.Set:
		return []byte("null"), nil
	case m.Percent > 0:
		return json.Marshal(m.String())
	}
	return json.Marshal(m.Count)
}

// ByteSize is a number of bytes, written as a whole number (1572864) or as
// a string with a binary unit, as Kubernetes writes quantities: "512Ki",
// "1.5Mi", "2Mi", "1Gi" (a fraction must come to whole bytes).
type ByteSize int64

var (
	// byteUnits are the units a ByteSize may be written with.
	byteUnits = map[string]int64{"": 1, "Ki": 1 << 10, "Mi": 1 << 20, "Gi": 1 << 30}
	// byteNumberRE is the number before the unit.
	byteNumberRE = regexp.MustCompile(`^[0-9]+(\.[0-9]+)?$`)
)

// UnmarshalJSON reads a whole number of bytes, or a string with a unit.
func (s *ByteSize) UnmarshalJSON(b []byte) error {
	const want = `must be a number of bytes like 1572864, or a size like "1.5Mi" or "512Ki"`
	text := string(bytes.TrimSpace(b))
	if text == "null" {
		return nil // as encoding/json does for its own types
	}
	if strings.HasPrefix(text, `"`) {
		if err := json.Unmarshal(b, &text); err != nil {
			return fmt.Errorf("invalid size %s: %s", b, want)
		}
		text = strings.TrimSpace(text)
	}
	num, unit := text, ""
	for u := range byteUnits {
		if u != "" && strings.HasSuffix(text, u) {
			num, unit = strings.TrimSpace(strings.TrimSuffix(text, u)), u
		}
	}
	if strings.HasPrefix(num, "-") && byteNumberRE.MatchString(num[1:]) {
		return fmt.Errorf("invalid size %q: must not be negative", text)
	}
	r, ok := new(big.Rat).SetString(num)
	if !ok || !byteNumberRE.MatchString(num) {
		return fmt.Errorf("invalid size %q: %s", text, want)
	}
	r.Mul(r, new(big.Rat).SetInt64(byteUnits[unit]))
	switch {
	case !r.IsInt():
		return fmt.Errorf("invalid size %q: comes to a fraction of a byte", text)
	case !r.Num().IsInt64():
		return fmt.Errorf("invalid size %q: too large", text)
	}
	*s = ByteSize(r.Num().Int64())
	return nil
}

// MarshalJSON writes the number of bytes.
func (s ByteSize) MarshalJSON() ([]byte, error) { return json.Marshal(int64(s)) }

// String writes the size in bytes, with its binary unit when it has a
// whole one: "1572864 bytes (1.5 MiB)".
func (s ByteSize) String() string {
	switch {
	case s >= 1<<20 && s%(1<<19) == 0:
		return fmt.Sprintf("%d bytes (%s MiB)", int64(s), strconv.FormatFloat(float64(s)/(1<<20), 'f', -1, 64))
	case s >= 1<<10 && s%(1<<10) == 0:
		return fmt.Sprintf("%d bytes (%d KiB)", int64(s), int64(s)>>10)
	}
	return fmt.Sprintf("%d bytes", int64(s))
}
