package protocol

// Ranges of the numeric fields of TOPIC CREATE and GROUP CREATE (SPEC.md
// 10.1, 10.2). DecodeStrict checks them before decoding, so a value out of
// range (0 where 0 is not a default, a negative size, a number too big for
// its field) is invalid_config naming the field and its range, never
// silently a default, and never invalid_json.

import (
	"bytes"
	"encoding/json"
	"math"
	"strconv"

	"github.com/fibrilmq/fibril/wire"
)

// fieldRange is the accepted range of one numeric field; minusOne also
// accepts -1 (max_deliveries: unlimited).
type fieldRange struct {
	min, max int64
	minusOne bool
}

func (r fieldRange) String() string {
	s := "[" + strconv.FormatInt(r.min, 10) + ", " + strconv.FormatInt(r.max, 10) + "]"
	if r.minusOne {
		s = "-1 or " + s
	}
	return s
}

// topicRanges and groupRanges: a field absent from the JSON takes its
// default; present, it must be in range.
var (
	topicRanges = map[string]fieldRange{
		"partitions":          {min: 1, max: 4096},
		"replicas":            {min: 1, max: 5}, // a cluster has 3 or 5 nodes; the broker checks its own count
		"max_age_ms":          {min: 0, max: math.MaxInt64},
		"max_bytes":           {min: 0, max: math.MaxInt64},
		"max_msgs":            {min: 0, max: math.MaxInt64},
		"max_unsettled_msgs":  {min: 0, max: math.MaxInt64},
		"max_unsettled_bytes": {min: 0, max: math.MaxInt64},
		"block_timeout_ms":    {min: 1, max: MaxMillis},
		"duplicate_window_ms": {min: 0, max: MaxMillis},
		"duplicate_max_ids":   {min: 1, max: wire.MaxDuplicateMaxIDs},
	}
	groupRanges = map[string]fieldRange{
		"lease_ms":       {min: 1, max: MaxMillis},
		"max_deliveries": {min: 1, max: MaxCount, minusOne: true},
		"start_seq":      {min: 1, max: math.MaxInt64},
	}
)

// checkRanges checks the numeric fields of the JSON object js against
// ranges. Syntax errors are left to the decoder (invalid_json).
func checkRanges(js []byte, ranges map[string]fieldRange) error {
	var fields map[string]json.RawMessage
	if json.Unmarshal(js, &fields) != nil {
		return nil
	}
	for name, raw := range fields {
		r, ok := ranges[name]
		if !ok {
			continue
		}
		raw = bytes.TrimSpace(raw)
		if len(raw) == 0 || (raw[0] != '-' && (raw[0] < '0' || raw[0] > '9')) {
			continue // not a number: the decoder says invalid_json
		}
		v, err := strconv.ParseInt(string(raw), 10, 64)
		if err != nil || v < r.min || v > r.max {
			if err == nil && r.minusOne && v == -1 {
				continue
			}
			return &Error{Code: CodeInvalidConfig, Detail: name + " " + string(raw) + " out of range " + r.String()}
		}
	}
	return nil
}
