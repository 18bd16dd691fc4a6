package qemu

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"time"
)

// QMP is a connection to a QEMU machine's monitor (QMP, the JSON
// protocol): one command at a time; the events that arrive meanwhile
// are kept for [QMP.WaitEvent].
type QMP struct {
	c      net.Conn
	r      *bufio.Reader
	events []Event
}

// Event is an asynchronous QMP event.
type Event struct {
	Name string          `json:"event"`
	Data json.RawMessage `json:"data"`
}

// QMPError is an error QEMU answered.
type QMPError struct {
	Command, Class, Desc string
}

func (e *QMPError) Error() string { return fmt.Sprintf("qmp %s: %s: %s", e.Command, e.Class, e.Desc) }

// DialQMP connects to the QMP socket at path and negotiates
// capabilities.
func DialQMP(path string, timeout time.Duration) (*QMP, error) {
	c, err := net.DialTimeout("unix", path, timeout)
	if err != nil {
		return nil, err
	}
	q := &QMP{c: c, r: bufio.NewReaderSize(c, 1<<16)}
	_ = c.SetDeadline(time.Now().Add(timeout))
	var greeting struct {
		QMP json.RawMessage `json:"QMP"`
	}
	line, err := q.r.ReadBytes('\n')
	if err == nil {
		err = json.Unmarshal(line, &greeting)
	}
	if err != nil || greeting.QMP == nil {
		c.Close()
		return nil, fmt.Errorf("qmp greeting on %s: %v", path, errors.Join(err, errors.New("not a QMP greeting")))
	}
	if _, err := q.Do("qmp_capabilities", nil, timeout); err != nil {
		c.Close()
		return nil, err
	}
	return q, nil
}

// Close closes the connection.
func (q *QMP) Close() error { return q.c.Close() }

// message is any line QEMU sends.
type message struct {
	Return json.RawMessage `json:"return"`
	Error  *struct {
		Class string `json:"class"`
		Desc  string `json:"desc"`
	} `json:"error"`
	Event string          `json:"event"`
	Data  json.RawMessage `json:"data"`
}

func (q *QMP) read(deadline time.Time) (message, error) {
	_ = q.c.SetReadDeadline(deadline)
	line, err := q.r.ReadBytes('\n')
	if err != nil {
		return message{}, err
	}
	var m message
	if err := json.Unmarshal(line, &m); err != nil {
		return message{}, fmt.Errorf("qmp: %q: %w", line, err)
	}
	return m, nil
}

// Do runs command with args (nil for none) and returns its result.
func (q *QMP) Do(command string, args any, timeout time.Duration) (json.RawMessage, error) {
	req := map[string]any{"execute": command}
	if args != nil {
		req["arguments"] = args
	}
	b, err := json.Marshal(req)
	if err != nil {
		return nil, err
	}
	deadline := time.Now().Add(timeout)
	_ = q.c.SetWriteDeadline(deadline)
	if _, err := q.c.Write(append(b, '\n')); err != nil {
		return nil, fmt.Errorf("qmp %s: %w", command, err)
	}
	for {
		m, err := q.read(deadline)
		if err != nil {
			return nil, fmt.Errorf("qmp %s: %w", command, err)
		}
		switch {
		case m.Event != "":
			q.events = append(q.events, Event{Name: m.Event, Data: m.Data})
		case m.Error != nil:
			return nil, &QMPError{Command: command, Class: m.Error.Class, Desc: m.Error.Desc}
		default:
			return m.Return, nil
		}
	}
}

// WaitEvent waits for an event named name whose data match(es), taking
// it and those before it from the kept ones.
func (q *QMP) WaitEvent(name string, match func(json.RawMessage) bool, timeout time.Duration) (Event, error) {
	deadline := time.Now().Add(timeout)
	for {
		for i, e := range q.events {
			if e.Name == name && (match == nil || match(e.Data)) {
				q.events = q.events[i+1:]
				return e, nil
			}
		}
		m, err := q.read(deadline)
		if err != nil {
			return Event{}, fmt.Errorf("waiting for qmp event %s: %w", name, err)
		}
		if m.Event != "" {
			q.events = append(q.events, Event{Name: m.Event, Data: m.Data})
		}
	}
}

// Status is the run state of the machine (query-status): "running",
// "paused", "inmigrate", "postmigrate", "finish-migrate"...
func (q *QMP) Status(timeout time.Duration) (string, error) {
	b, err := q.Do("query-status", nil, timeout)
	if err != nil {
		return "", err
	}
	var s struct {
		Status string `json:"status"`
	}
	if err := json.Unmarshal(b, &s); err != nil {
		return "", err
	}
	return s.Status, nil
}
