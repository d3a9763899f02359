package conformance

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strconv"
	"strings"
)

// checkDeliveries checks a list of deliveries against e.
func (r *run) checkDeliveries(e *Expect, ds []*Delivery) error {
	if e == nil {
		return nil
	}
	if e.Count != nil && len(ds) != *e.Count {
		return fmt.Errorf("got %d messages %s, want %d", len(ds), summary(ds), *e.Count)
	}
	if e.MinCount != nil && len(ds) < *e.MinCount {
		return fmt.Errorf("got %d messages, want at least %d", len(ds), *e.MinCount)
	}
	if len(e.Messages) > len(ds) {
		return fmt.Errorf("got %d messages %s, want at least %d", len(ds), summary(ds), len(e.Messages))
	}
	for i, me := range e.Messages {
		if err := r.checkMsg(me, ds[i]); err != nil {
			return fmt.Errorf("message %d: %w", i, err)
		}
	}
	if e.DistinctData != nil {
		seen := map[string]int{}
		for _, d := range ds {
			seen[string(d.Data)]++
		}
		for k, n := range seen {
			if n > 1 {
				return fmt.Errorf("%q delivered %d times", k, n)
			}
		}
		if len(seen) != *e.DistinctData {
			return fmt.Errorf("%d distinct payloads, want %d", len(seen), *e.DistinctData)
		}
	}
	if e.OrderedByKey || e.SamePartitionPerKey {
		last := map[string]int{}
		part := map[string]int{}
		for _, d := range ds {
			k, n, err := keyIndex(d.Data)
			if err != nil {
				return err
			}
			if prev, ok := last[k]; ok && e.OrderedByKey && n <= prev {
				return fmt.Errorf("key %s: %d delivered after %d", k, n, prev)
			}
			last[k] = n
			if p, ok := part[k]; ok && e.SamePartitionPerKey && p != d.Partition {
				return fmt.Errorf("key %s in partitions %d and %d", k, p, d.Partition)
			}
			part[k] = d.Partition
		}
	}
	if e.DistinctPartitions != nil {
		ps := map[int]bool{}
		for _, d := range ds {
			ps[d.Partition] = true
		}
		if len(ps) != *e.DistinctPartitions {
			return fmt.Errorf("messages came from %d partitions, want %d", len(ps), *e.DistinctPartitions)
		}
	}
	return nil
}

// keyIndex splits the "<key>:<i>" payload publish_many writes.
func keyIndex(data []byte) (string, int, error) {
	k, i, ok := strings.Cut(string(data), ":")
	n, err := strconv.Atoi(i)
	if !ok || err != nil {
		return "", 0, fmt.Errorf("payload %q is not <key>:<n>", data)
	}
	return k, n, nil
}

func summary(ds []*Delivery) string {
	var b strings.Builder
	b.WriteByte('[')
	for i, d := range ds {
		if i == 8 {
			b.WriteString(" ...")
			break
		}
		if i > 0 {
			b.WriteByte(' ')
		}
		s := string(d.Data)
		if len(s) > 24 {
			s = s[:24] + "..."
		}
		fmt.Fprintf(&b, "%q#%d", s, d.DeliveryCount)
	}
	b.WriteByte(']')
	return b.String()
}

func (r *run) checkMsg(me MsgExpect, d *Delivery) error {
	if me.Data != nil && string(d.Data) != r.x(*me.Data) {
		return fmt.Errorf("data %q, want %q", d.Data, r.x(*me.Data))
	}
	if len(me.DataSize) > 0 {
		n, err := r.size(me.DataSize)
		if err != nil {
			return err
		}
		if len(d.Data) != n {
			return fmt.Errorf("data is %d bytes, want %d", len(d.Data), n)
		}
		if string(d.Data) != string(Fill(n)) {
			return fmt.Errorf("data of %d bytes differs from the pattern sent", n)
		}
	}
	if me.Subject != nil && d.Subject != r.x(*me.Subject) {
		return fmt.Errorf("subject %q, want %q", d.Subject, r.x(*me.Subject))
	}
	if me.DeliveryCount != nil && d.DeliveryCount != *me.DeliveryCount {
		return fmt.Errorf("delivery count %d, want %d", d.DeliveryCount, *me.DeliveryCount)
	}
	for k, v := range me.Headers {
		got := headerGet(d.Header, k)
		if got == nil || *got != r.x(v) {
			g := "<absent>"
			if got != nil {
				g = *got
			}
			return fmt.Errorf("header %s = %q, want %q", k, g, r.x(v))
		}
	}
	for _, k := range me.NoHeaders {
		if headerGet(d.Header, k) != nil {
			return fmt.Errorf("header %s present, want absent", k)
		}
	}
	return nil
}

func headerGet(h map[string][]string, k string) *string {
	for hk, vs := range h {
		if strings.EqualFold(hk, k) && len(vs) > 0 {
			return &vs[0]
		}
	}
	return nil
}

// matchFields checks that every dotted path in want has that value in the
// JSON answer (numbers compare as numbers; strings are ${}-expanded).
func matchFields(ans json.RawMessage, want map[string]any, x func(string) string) error {
	var doc any
	if err := json.Unmarshal(ans, &doc); err != nil {
		return fmt.Errorf("answer %s is not JSON: %w", ans, err)
	}
	for path, w := range want {
		got, ok := lookup(doc, path)
		if !ok {
			return fmt.Errorf("answer %s has no field %s", ans, path)
		}
		w = expandAll(w, x)
		if !reflect.DeepEqual(normalize(got), normalize(w)) {
			return fmt.Errorf("field %s = %v, want %v", path, got, w)
		}
	}
	return nil
}

// expandAll applies x to every string in v (nested lists and objects too).
func expandAll(v any, x func(string) string) any {
	switch t := v.(type) {
	case string:
		return x(t)
	case []any:
		out := make([]any, len(t))
		for i, e := range t {
			out[i] = expandAll(e, x)
		}
		return out
	case map[string]any:
		out := make(map[string]any, len(t))
		for k, e := range t {
			out[k] = expandAll(e, x)
		}
		return out
	}
	return v
}

func lookup(doc any, path string) (any, bool) {
	cur := doc
	for _, p := range strings.Split(path, ".") {
		m, ok := cur.(map[string]any)
		if !ok {
			return nil, false
		}
		if cur, ok = m[p]; !ok {
			return nil, false
		}
	}
	return cur, true
}

func normalize(v any) any {
	switch t := v.(type) {
	case int:
		return float64(t)
	case []any:
		out := make([]any, len(t))
		for i, e := range t {
			out[i] = normalize(e)
		}
		return out
	}
	return v
}

// listNames extracts the names of a list answer: {"topics":[...]} or
// {"topic":...,"groups":[...]} (SPEC.md section 10).
func listNames(ans json.RawMessage) []string {
	var l struct {
		Topics []string `json:"topics"`
		Groups []string `json:"groups"`
	}
	if json.Unmarshal(ans, &l) != nil {
		return nil
	}
	return append(l.Topics, l.Groups...)
}
