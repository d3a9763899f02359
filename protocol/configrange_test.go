package protocol

import (
	"errors"
	"strings"
	"testing"
)

// TestConfigOutOfRangeIsInvalidConfig: {"lease_ms":0} and
// {"max_deliveries":0} used to become the defaults silently, and a lease_ms
// too big for its field answered invalid_json.
func TestConfigOutOfRangeIsInvalidConfig(t *testing.T) {
	cases := []struct {
		js    string
		group bool
		code  Code   // "" when accepted
		field string // named in the detail
	}{
		{`{"lease_ms":0}`, true, CodeInvalidConfig, "lease_ms"},
		{`{"lease_ms":-5}`, true, CodeInvalidConfig, "lease_ms"},
		{`{"lease_ms":4294967296}`, true, CodeInvalidConfig, "lease_ms"},
		{`{"lease_ms":99999999999999999999999}`, true, CodeInvalidConfig, "lease_ms"},
		{`{"lease_ms":1.5}`, true, CodeInvalidConfig, "lease_ms"},
		{`{"lease_ms":4294967295}`, true, "", ""},
		{`{"max_deliveries":0}`, true, CodeInvalidConfig, "max_deliveries"},
		{`{"max_deliveries":-2}`, true, CodeInvalidConfig, "max_deliveries"},
		{`{"max_deliveries":-1}`, true, "", ""},
		{`{"max_deliveries":3}`, true, "", ""},
		{`{"start":"seq","start_seq":0}`, true, CodeInvalidConfig, "start_seq"},
		{`{"start":"seq","start_seq":-3}`, true, CodeInvalidConfig, "start_seq"},
		{`{"start":"seq","start_seq":7,"start_time":"2026-12-03T14:00:00Z"}`, true, "", ""},
		{`{"lease_ms":"x"}`, true, CodeInvalidJSON, ""},
		{`{"partitions":0}`, false, CodeInvalidConfig, "partitions"},
		{`{"partitions":4097}`, false, CodeInvalidConfig, "partitions"},
		{`{"max_bytes":-1}`, false, CodeInvalidConfig, "max_bytes"},
		{`{"max_unsettled_msgs":0}`, false, "", ""},
		{`{"max_unsettled_msgs":100,"partitions":3}`, false, "", ""},
		{`{"bogus":1}`, false, CodeInvalidJSON, ""},
	}
	for _, tc := range cases {
		var err error
		if tc.group {
			var g GroupConfig
			err = DecodeStrict([]byte(tc.js), &g)
		} else {
			var c TopicConfig
			err = DecodeStrict([]byte(tc.js), &c)
		}
		var pe *Error
		switch {
		case tc.code == "" && err != nil:
			t.Errorf("%s: %v, want accepted", tc.js, err)
		case tc.code != "" && (!errors.As(err, &pe) || pe.Code != tc.code):
			t.Errorf("%s: %v, want %s", tc.js, err, tc.code)
		case tc.field != "" && !strings.Contains(pe.Detail, tc.field+" ") || tc.field != "" && !strings.Contains(pe.Detail, "range"):
			t.Errorf("%s: detail %q does not name %s and its range", tc.js, pe.Detail, tc.field)
		}
	}
}
