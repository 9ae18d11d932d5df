package main

import (
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cudaep/cudaep/capi/handles"
	"github.com/cudaep/cudaep/ep"
)

func TestCodeOfMapsTheShimsErrorsAndEveryEpCode(t *testing.T) {
	scratch := handles.NewTable(handles.Config[int]{Kind: 200, Name: "scratch"})
	h, err := scratch.Insert(1)
	require.NoError(t, err)
	require.NoError(t, scratch.Remove(h))
	_, stale := scratch.Get(h)
	_, invalid := scratch.Get(0)
	require.Error(t, stale)
	require.Error(t, invalid)

	tests := []struct {
		name string
		err  error
		want code
	}{
		{"nil", nil, codeOK},
		{"stale handle", stale, codeStaleHandle},
		{"invalid handle", invalid, codeInvalidHandle},
		{"table full", fmt.Errorf("insert: %w", handles.ErrFull), codeOutOfMemory},
		{"shim argument", argError("out_options is NULL"), codeInvalidArgument},
		{"ep argument", fmt.Errorf("%w: size is 0", ep.ErrInvalidArgument), codeInvalidArgument},
		{"released buffer", fmt.Errorf("retain: %w", ep.ErrReleased), codeStaleHandle},
		{"capture window", fmt.Errorf("x: %w", ep.ErrCaptureLive), codeWrongState},
		{"no such device", fmt.Errorf("%w: device_id 9", ep.ErrNoDevice), codeNotFound},
		{"anything else", errors.New("surprise"), codeFail},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, codeOf(tt.err))
		})
	}
	// Every ep code has a distinct status code (CodeFail and CodeOK are themselves).
	seen := map[code]ep.ErrorCode{}
	for _, c := range ep.Codes() {
		require.Less(t, int(c), len(codes), "ep code %v has no entry in the table", c)
		if prev, dup := seen[codes[c]]; dup {
			t.Errorf("ep codes %v and %v both map to %d", prev, c, codes[c])
		}
		seen[codes[c]] = c
	}
}

func TestStatusOfCarriesCodeAndMessage(t *testing.T) {
	assert.Nil(t, statusOf(nil))
	c, msg := readStatus(statusOf(fmt.Errorf("%w: device_id 9 is out of range", ep.ErrNoDevice)))
	assert.Equal(t, codeNotFound, c)
	assert.Equal(t, "ep: no such device: device_id 9 is out of range", msg)

	c, msg = readStatus(newStatus(codeWrongState, ""))
	assert.Equal(t, codeWrongState, c)
	assert.Equal(t, "", msg)
}

// panicking is shaped like an export: a named status result and recoverInto deferred first.
func panicking(v any) (st *status) {
	defer recoverInto(&st)
	panic(v)
}

func TestRecoverIntoTurnsPanicsIntoFail(t *testing.T) {
	c, msg := readStatus(panicking("index out of range in a shim"))
	assert.Equal(t, codeFail, c)
	assert.Contains(t, msg, "recovered panic")
	assert.Contains(t, msg, "index out of range in a shim")

	c, msg = readStatus(panicking(fmt.Errorf("wrapped %w", ep.ErrClosed)))
	assert.Equal(t, codeFail, c)
	assert.Contains(t, msg, "wrapped ep: provider closed")
}
