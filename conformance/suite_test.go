package conformance

import (
	"bytes"
	"strings"
	"testing"
)

func TestResultsRoundTrip(t *testing.T) {
	in := []Result{
		{Scenario: "a", Runner: "wire", Status: Pass},
		{Scenario: "a", Runner: "py-sdk", Status: Fail, Detail: "step 2 (poll): got 0 messages"},
		{Scenario: "b", Runner: "js-sdk", Status: Skip, Detail: "server does not advertise restart"},
	}
	var b bytes.Buffer
	if err := WriteResults(&b, in); err != nil {
		t.Fatal(err)
	}
	out, err := ReadResults(&b)
	if err != nil {
		t.Fatal(err)
	}
	if len(out) != len(in) || out[1] != in[1] {
		t.Fatalf("round trip: %+v", out)
	}
	if _, err := ReadResults(strings.NewReader(`{"scenario":"a","runner":"x","status":"ok"}`)); err == nil {
		t.Fatal("status ok accepted")
	}
	var table bytes.Buffer
	if fails := PrintTable(&table, in); fails != 1 {
		t.Fatalf("PrintTable counted %d failures, want 1:\n%s", fails, table.String())
	}
	if !strings.Contains(table.String(), "py-sdk") || !strings.Contains(table.String(), "step 2 (poll)") {
		t.Fatalf("table:\n%s", table.String())
	}
}

func TestParseRejectsUnknownFields(t *testing.T) {
	for _, in := range []string{
		`{"name":"x","steps":[{"op":"publish","subjct":"a"}]}`,
		`{"name":"x","steps":[{"op":"publsh"}]}`,
		`{"name":"x","requires":["teleport"],"steps":[{"op":"connect"}]}`,
		`{"name":"","steps":[{"op":"connect"}]}`,
	} {
		if _, err := Parse([]byte(in)); err == nil {
			t.Errorf("Parse(%s) accepted", in)
		}
	}
}

func TestExpectations(t *testing.T) {
	r := &run{vars: map[string]string{"T": "cf.x"}, env: &Env{Info: map[string]any{"max_payload": float64(8)}}}
	ds := []*Delivery{
		{Data: []byte("k1:0"), Partition: 1, DeliveryCount: 1, Subject: "cf.x", Header: map[string][]string{"X-A": {"1"}}},
		{Data: []byte("k2:1"), Partition: 0, DeliveryCount: 1},
		{Data: []byte("k1:2"), Partition: 1, DeliveryCount: 2},
	}
	three, two := 3, 2
	subj, one := "${T}", 1
	ok := []*Expect{
		{Count: &three},
		{DistinctData: &three, OrderedByKey: true, SamePartitionPerKey: true, DistinctPartitions: &two},
		{Messages: []MsgExpect{{Subject: &subj, DeliveryCount: &one, Headers: map[string]string{"x-a": "1"}}}},
	}
	for i, e := range ok {
		if err := r.checkDeliveries(e, ds); err != nil {
			t.Errorf("expectation %d: %v", i, err)
		}
	}
	swapped := []*Delivery{ds[2], ds[1], ds[0]}
	bad := []struct {
		e  *Expect
		ds []*Delivery
	}{
		{&Expect{Count: &two}, ds},
		{&Expect{OrderedByKey: true}, swapped},
		{&Expect{DistinctData: &three}, []*Delivery{ds[0], ds[0], ds[1]}},
		{&Expect{Messages: []MsgExpect{{DeliveryCount: &two}}}, ds},
		{&Expect{Messages: []MsgExpect{{NoHeaders: []string{"X-A"}}}}, ds},
		{&Expect{SamePartitionPerKey: true}, []*Delivery{ds[0], {Data: []byte("k1:5"), Partition: 3}}},
	}
	for i, b := range bad {
		if err := r.checkDeliveries(b.e, b.ds); err == nil {
			t.Errorf("bad expectation %d passed", i)
		}
	}
	if n, err := r.size([]byte(`"max_payload+1"`)); err != nil || n != 9 {
		t.Fatalf("size = %d, %v", n, err)
	}
	if err := matchFields([]byte(`{"name":"cf.x","config":{"partitions":3,"subjects":["cf.x"]}}`),
		map[string]any{"name": "${T}", "config.partitions": float64(3), "config.subjects": []any{"${T}"}}, r.x); err != nil {
		t.Fatal(err)
	}
	if err := matchFields([]byte(`{"config":{"partitions":2}}`), map[string]any{"config.partitions": float64(3)}, r.x); err == nil {
		t.Fatal("mismatch passed")
	}
}

func TestEveryOpIsUsedAndDescribed(t *testing.T) {
	scs, err := Scenarios()
	if err != nil {
		t.Fatal(err)
	}
	used := map[string]bool{}
	for _, sc := range scs {
		if sc.Description == "" {
			t.Errorf("%s has no description", sc.File)
		}
		for _, st := range sc.Steps {
			used[st.Op] = true
		}
	}
	for _, op := range ops {
		if !used[op] {
			t.Errorf("op %q is used by no scenario", op)
		}
	}
}

// TestParseChecksClusterScenarios: a cluster has 3 or 5 nodes, kill_node
// and restart_node need a cluster scenario and name one of its nodes, and
// drivers that do not fail over are not applicable to one.
func TestParseChecksClusterScenarios(t *testing.T) {
	for _, tc := range []struct {
		name, json, err string
	}{
		{"three nodes", `{"name":"x","cluster":3,"steps":[{"op":"kill_node","node":2},{"op":"restart_node"}]}`, ""},
		{"two nodes", `{"name":"x","cluster":2,"steps":[{"op":"connect"}]}`, "3 or 5 nodes"},
		{"kill without cluster", `{"name":"x","steps":[{"op":"kill_node"}]}`, "needs a cluster scenario"},
		{"restart without cluster", `{"name":"x","steps":[{"op":"restart_node","node":0}]}`, "needs a cluster scenario"},
		{"node out of range", `{"name":"x","cluster":3,"steps":[{"op":"kill_node","node":3}]}`, "node 3 is not one"},
		{"negative node", `{"name":"x","cluster":3,"steps":[{"op":"kill_node","node":-1}]}`, "node -1 is not one"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sc, err := Parse([]byte(tc.json))
			switch {
			case tc.err == "" && err != nil:
				t.Fatalf("Parse: %v", err)
			case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
				t.Fatalf("Parse: error %v, want one containing %q", err, tc.err)
			case tc.err == "":
				if why := NotApplicable(sc, WireDriver{}); !strings.Contains(why, "not applicable") {
					t.Errorf("wire driver on a cluster scenario: %q, want not applicable", why)
				}
				if why := NotApplicable(sc, SDKDriver{}); why != "" {
					t.Errorf("go-sdk driver on a cluster scenario: %q, want applicable", why)
				}
			}
		})
	}
}
