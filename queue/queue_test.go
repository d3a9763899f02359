package queue

import (
	"context"
	"errors"
	"os"
	"testing"
	"time"
)

func openT(t *testing.T) *DB {
	t.Helper()
	db, err := Open(t.TempDir(), Options{Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

func TestDeclareValidatesOnce(t *testing.T) {
	db := openT(t)
	for name, cfg := range map[string]Config[int]{
		"negative lease":   {Lease: -time.Second},
		"no dead letter":   {DeadLetter: "-"},
		"bad durability":   {Durability: "sometimes"},
		"bad partitions":   {Partitions: -1},
		"nil codec func":   {Codec: CodecFuncs[int](nil, nil)},
		"bad max delivery": {MaxDeliveries: -2},
	} {
		if _, err := Declare(db, "q", cfg); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: got %v, want ErrInvalid", name, err)
		}
	}
	if _, err := Declare(db, "a b", Config[int]{}); !errors.Is(err, ErrInvalid) {
		t.Errorf("bad name: got %v", err)
	}
	if _, err := Declare(db, "$DLQ.x.y", Config[int]{}); !errors.Is(err, ErrInvalid) {
		t.Errorf("typed dead-letter queue: got %v", err)
	}
}

func TestDeclareAgainWithAnotherConfigIsAMismatch(t *testing.T) {
	db := openT(t)
	if _, err := Declare(db, "q", Config[int]{Lease: time.Second}); err != nil {
		t.Fatal(err)
	}
	if _, err := Declare(db, "q", Config[string]{Lease: time.Second}); err != nil {
		t.Fatalf("same config, other type: %v", err)
	}
	if _, err := Declare(db, "q", Config[int]{Lease: 2 * time.Second}); !errors.Is(err, ErrMismatch) {
		t.Errorf("other lease: got %v, want ErrMismatch", err)
	}
	if _, err := Declare(db, "q", Config[int]{Durability: DurabilitySync, Lease: time.Second}); !errors.Is(err, ErrMismatch) {
		t.Errorf("other durability: got %v, want ErrMismatch", err)
	}
	if _, err := Declare(db, "q", Config[int]{Group: "audit"}); err != nil {
		t.Errorf("another group of the same queue: %v", err)
	}
}

// TestFetchDeadLettersUndecodable: a message the codec refuses is never
// returned and never dropped: it is in the dead-letter queue with the
// reason and the error, and the source has nothing pending.
func TestFetchDeadLettersUndecodable(t *testing.T) {
	db := openT(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	codec := CodecFuncs(func(v int) ([]byte, error) { return []byte{byte(v)}, nil },
		func(b []byte) (int, error) {
			if b[0] == 13 {
				return 0, errors.New("unlucky\nnumber")
			}
			return int(b[0]), nil
		})
	q, err := Declare(db, "q", Config[int]{Codec: codec})
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range []int{12, 13, 14} {
		if err := q.Publish(ctx, v); err != nil {
			t.Fatal(err)
		}
	}
	var got []int
	for len(got) < 2 {
		ds, err := q.Fetch(ctx, 10)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range ds {
			got = append(got, d.Value)
			if err := d.Ack(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	if len(got) != 2 || got[0] != 12 || got[1] != 14 {
		t.Fatalf("handed out %v, want [12 14]", got)
	}
	if st, err := q.Stats(ctx); err != nil || st.Pending != 0 {
		t.Fatalf("source pending %d (%v), want 0", st.Pending, err)
	}
	dead, err := q.DeadLetters()
	if err != nil {
		t.Fatal(err)
	}
	ds, err := dead.Fetch(ctx, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(ds) != 1 || ds[0].Value[0] != 13 {
		t.Fatalf("dead letters %v", ds)
	}
	d := ds[0]
	if d.Header("Fibril-Reason") != ReasonDecodeError || d.Header("Fibril-Error") != "unlucky number" ||
		d.Header("Fibril-Subject") != "q" || d.Header("Fibril-Deliveries") != "1" {
		t.Errorf("dead letter header %q", d.raw.Header)
	}
}

// TestMessagesGivesBackWhatItDidNotYield: leaving the loop early returns
// the rest of the fetched batch to the queue at once, not after the lease.
func TestMessagesGivesBackWhatItDidNotYield(t *testing.T) {
	db := openT(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	q, err := Declare(db, "q", Config[int]{Lease: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	for v := range 5 {
		if err := q.Publish(ctx, v); err != nil {
			t.Fatal(err)
		}
	}
	for d, err := range q.Messages(ctx) {
		if err != nil {
			t.Fatal(err)
		}
		if err := d.Ack(ctx); err != nil {
			t.Fatal(err)
		}
		break
	}
	st, err := q.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.Ready != 4 || st.InFlight != 0 || st.Acked != 1 {
		t.Fatalf("after one of five: %+v, want 4 ready, none in flight", st)
	}
}

func TestClosedDBRefuses(t *testing.T) {
	db, err := OpenMemory(Options{})
	if err != nil {
		t.Fatal(err)
	}
	dir := db.Dir()
	q, err := Declare(db, "q", Config[int]{})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if err := q.Publish(context.Background(), 1); !errors.Is(err, ErrClosed) {
		t.Errorf("publish after close: %v", err)
	}
	if _, err := q.Fetch(context.Background(), 1); !errors.Is(err, ErrClosed) {
		t.Errorf("fetch after close: %v", err)
	}
	if err := q.Consume(context.Background(), 0, nil); !errors.Is(err, ErrInvalid) {
		t.Errorf("consume without workers: %v", err)
	}
	if _, err := OpenMemory(Options{Storage: Memory()}); !errors.Is(err, ErrInvalid) {
		t.Errorf("OpenMemory with a storage: %v", err)
	}
	if _, err := Open("", Options{}); !errors.Is(err, ErrInvalid) {
		t.Errorf("Open without a directory: %v", err)
	}
	if _, err := Declare(db, "r", Config[int]{}); !errors.Is(err, ErrClosed) {
		t.Errorf("declare after close: %v", err)
	}
	if err := db.Close(); err != nil {
		t.Errorf("second close: %v", err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("the memory DB's directory %s is still there: %v", dir, err)
	}
}
