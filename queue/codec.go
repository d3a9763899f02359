package queue

import (
	"encoding/json"
	"fmt"
)

// Codec turns a queue's values into message bytes and back. Encode runs in
// Publish on the caller's goroutine; Decode runs when a message is fetched.
// Both must be safe for concurrent use. Decode owns data (a copy): it may
// keep it. A Decode error dead-letters the message (see Queue.Fetch).
type Codec[T any] interface {
	Encode(v T) ([]byte, error)
	Decode(data []byte) (T, error)
}

// JSON returns the codec that stores values as encoding/json does: the
// default for every type except []byte.
func JSON[T any]() Codec[T] { return jsonCodec[T]{} }

type jsonCodec[T any] struct{}

func (jsonCodec[T]) Encode(v T) ([]byte, error) { return json.Marshal(v) }

func (jsonCodec[T]) Decode(data []byte) (T, error) {
	var v T
	err := json.Unmarshal(data, &v)
	return v, err
}

// Bytes returns the codec that stores a []byte as it is: the default for
// Queue[[]byte]. Encode keeps no reference to its argument past Publish.
func Bytes() Codec[[]byte] { return bytesCodec{} }

type bytesCodec struct{}

func (bytesCodec) Encode(v []byte) ([]byte, error)    { return v, nil }
func (bytesCodec) Decode(data []byte) ([]byte, error) { return data, nil }

// CodecFuncs returns a Codec made of two functions: a user codec (protobuf,
// gob, a versioned format) without a type of its own.
func CodecFuncs[T any](encode func(T) ([]byte, error), decode func([]byte) (T, error)) Codec[T] {
	return funcCodec[T]{encode, decode}
}

type funcCodec[T any] struct {
	enc func(T) ([]byte, error)
	dec func([]byte) (T, error)
}

func (c funcCodec[T]) Encode(v T) ([]byte, error)    { return c.enc(v) }
func (c funcCodec[T]) Decode(data []byte) (T, error) { return c.dec(data) }

// defaultCodec is Bytes for []byte and JSON for everything else.
func defaultCodec[T any]() Codec[T] {
	if c, ok := any(bytesCodec{}).(Codec[T]); ok {
		return c
	}
	return JSON[T]()
}

// validCodec refuses a CodecFuncs with a nil function once, at Declare.
func validCodec[T any](c Codec[T]) error {
	if f, ok := c.(funcCodec[T]); ok && (f.enc == nil || f.dec == nil) {
		return fmt.Errorf("%w: CodecFuncs with a nil function", ErrInvalid)
	}
	return nil
}
