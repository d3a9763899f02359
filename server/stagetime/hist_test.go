package stagetime

import (
	"testing"
	"time"
)

// TestBucketBounds: every duration falls in the bucket whose bound is the
// least one at or above it, and the buckets' bounds increase.
func TestBucketBounds(t *testing.T) {
	cases := []struct {
		d    time.Duration
		want int
	}{
		{0, 0},
		{1, 0},
		{1024, 0},
		{1025, 1},
		{1280, 1},
		{1281, 2},
		{2048, 4},
		{2049, 5},
		{time.Millisecond, bucket(uint64(time.Millisecond))},
		{20 * time.Second, NumBuckets - 4},
		{60 * time.Second, NumBuckets - 1},
	}
	for _, tc := range cases {
		got := bucket(uint64(tc.d))
		if got != tc.want {
			t.Errorf("bucket(%v) = %d, want %d", tc.d, got, tc.want)
		}
		if got < NumBuckets-1 && tc.d > UpperBound(got) {
			t.Errorf("%v is above its bucket's bound %v", tc.d, UpperBound(got))
		}
		if got > 0 && tc.d <= UpperBound(got-1) {
			t.Errorf("%v belongs below bucket %d (previous bound %v)", tc.d, got, UpperBound(got-1))
		}
	}
	for i := 1; i < NumBuckets; i++ {
		if UpperBound(i) <= UpperBound(i-1) {
			t.Fatalf("bound %d (%v) not above bound %d (%v)", i, UpperBound(i), i-1, UpperBound(i-1))
		}
	}
	// a bucket is at most a quarter of its octave wide
	for _, d := range []time.Duration{3 * time.Microsecond, 777 * time.Microsecond, 5 * time.Millisecond, time.Second} {
		b := UpperBound(bucket(uint64(d)))
		if float64(b) > float64(d)*1.25 {
			t.Errorf("%v lands under bound %v: more than 25 %% above it", d, b)
		}
	}
}

// TestHistQuantiles: counts, sum, mean and quantiles of known samples.
func TestHistQuantiles(t *testing.T) {
	cases := []struct {
		name      string
		samples   []time.Duration
		q         float64
		wantQ     time.Duration // a bound: the quantile lands in its bucket
		wantMean  time.Duration
		wantCount uint64
	}{
		{"empty", nil, 0.99, 0, 0, 0},
		{"one", []time.Duration{time.Millisecond}, 0.5, time.Millisecond, time.Millisecond, 1},
		{"tail", append(repeat(100*time.Microsecond, 99), 10*time.Millisecond), 0.99, 100 * time.Microsecond, 199 * time.Microsecond, 100},
		{"tail p100", append(repeat(100*time.Microsecond, 99), 10*time.Millisecond), 1, 10 * time.Millisecond, 199 * time.Microsecond, 100},
		{"negative is zero", []time.Duration{-5}, 0.5, 0, 0, 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var h Hist
			for _, d := range tc.samples {
				h.Observe(d)
			}
			s := h.Snapshot()
			if s.Count != tc.wantCount {
				t.Fatalf("count %d, want %d", s.Count, tc.wantCount)
			}
			if s.Mean() != tc.wantMean {
				t.Fatalf("mean %v, want %v", s.Mean(), tc.wantMean)
			}
			got := s.Quantile(tc.q)
			want := time.Duration(0)
			if tc.wantCount > 0 {
				want = UpperBound(bucket(uint64(max(tc.wantQ, 0))))
			}
			if got != want {
				t.Fatalf("q%.2f = %v, want %v", tc.q, got, want)
			}
		})
	}
}

func repeat(d time.Duration, n int) []time.Duration {
	out := make([]time.Duration, n)
	for i := range out {
		out[i] = d
	}
	return out
}

// TestRecorder: a nil Recorder and an unsampled origin record nothing; a
// sampled one lands in its stage only.
func TestRecorder(t *testing.T) {
	var nilRec *Recorder
	nilRec.Since(Parsed, Now()) // must not panic
	r := NewRecorder(0)
	r.Since(Parsed, 0)
	if n := r.Snapshot(Parsed).Count; n != 0 {
		t.Fatalf("an unsampled origin was recorded (%d)", n)
	}
	o := Now()
	r.At(Appended, o, o+int64(3*time.Millisecond))
	for s := Stage(0); s < NumStages; s++ {
		want := uint64(0)
		if s == Appended {
			want = 1
		}
		if n := r.Snapshot(s).Count; n != want {
			t.Fatalf("stage %v holds %d samples, want %d", s, n, want)
		}
	}
	if s := r.Snapshot(Appended); s.Mean() != 3*time.Millisecond {
		t.Fatalf("mean %v, want 3ms", s.Mean())
	}
	if Now() == 0 {
		t.Fatal("Now is 0, the value that means not sampled")
	}
}

// TestObserveAllocs: an observation allocates nothing.
func TestObserveAllocs(t *testing.T) {
	r := NewRecorder(0)
	o := Now()
	if n := testing.AllocsPerRun(1000, func() { r.Since(FsyncEnd, o) }); n != 0 {
		t.Fatalf("%v allocations per observation", n)
	}
}

// TestGate: a gate lets one sample through per gap of origin times; a
// zero gap lets every one through; a nil gate, and an origin of 0, none.
func TestGate(t *testing.T) {
	ms := int64(time.Millisecond)
	cases := []struct {
		name    string
		gap     time.Duration
		origins []int64
		want    []bool
	}{
		{"zero gap", 0, []int64{1, 1, 2}, []bool{true, true, true}},
		{"one per ms", time.Millisecond, []int64{1, 2, ms, ms + 1, 3 * ms}, []bool{true, false, false, true, true}},
		{"not sampled", time.Millisecond, []int64{0, 5}, []bool{false, true}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewGate(tc.gap)
			for i, o := range tc.origins {
				if got := g.Open(o); got != tc.want[i] {
					t.Fatalf("Open(%d) #%d = %v, want %v", o, i, got, tc.want[i])
				}
			}
		})
	}
	var nilGate *Gate
	if nilGate.Open(Now()) {
		t.Fatal("a nil gate opened")
	}
	var nilRec *Recorder
	if nilRec.SamplePub(Now()) != 0 {
		t.Fatal("a nil recorder sampled")
	}
}
