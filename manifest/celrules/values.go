package celrules

import (
	"encoding/json"
	"math"
)

// normalize returns a copy of a decoded JSON or YAML value with numbers as
// Kubernetes decodes them: int64 when whole, float64 otherwise. Kubernetes'
// CEL values accept nothing else, and an integer field holding 3.0 or
// json.Number("3") must read as the integer 3. A nil map or list becomes
// nil, as an absent value.
func normalize(v any) any {
	switch v := v.(type) {
	case nil:
		return nil
	case map[string]any:
		if v == nil {
			return nil
		}
		out := make(map[string]any, len(v))
		for k, val := range v {
			out[k] = normalize(val)
		}
		return out
	case []any:
		if v == nil {
			return nil
		}
		out := make([]any, len(v))
		for i, val := range v {
			out[i] = normalize(val)
		}
		return out
	case json.Number:
		if i, err := v.Int64(); err == nil {
			return i
		}
		if f, err := v.Float64(); err == nil {
			return wholeToInt(f)
		}
		return v.String()
	case float64:
		return wholeToInt(v)
	case float32:
		return wholeToInt(float64(v))
	case int:
		return int64(v)
	case int8:
		return int64(v)
	case int16:
		return int64(v)
	case int32:
		return int64(v)
	case uint:
		return uintToInt(uint64(v))
	case uint8:
		return int64(v)
	case uint16:
		return int64(v)
	case uint32:
		return int64(v)
	case uint64:
		return uintToInt(v)
	default:
		return v
	}
}

// wholeToInt returns f as an int64 when it is a whole number that fits.
func wholeToInt(f float64) any {
	if f == math.Trunc(f) && f >= math.MinInt64 && f < math.MaxInt64 {
		return int64(f)
	}
	return f
}

// uintToInt returns u as an int64 when it fits, else as a float64, as a
// JSON decoder would.
func uintToInt(u uint64) any {
	if u <= math.MaxInt64 {
		return int64(u)
	}
	return float64(u)
}
