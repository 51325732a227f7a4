package kube

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/shiroagent/shiro/sandbox/helper"
	"github.com/shiroagent/shiro/sandbox/owner"
)

// The helper reaches a pod without a registry: its bytes are cut into
// chunks, each the binary data of an immutable config map named by the
// binary's hash (shared by every pod in the namespace that runs the same
// helper), and the pod's setup container joins them into an emptyDir the
// sandbox container mounts read-only. A config map holds at most 1 MiB.
const (
	chunkSize = 960 << 10
	chunkKey  = "chunk"
)

// helperBinary is the helper to deliver: its bytes and their hash.
type helperBinary struct {
	data []byte
	hash string // 12 hex digits of its SHA-256
}

func loadHelper(path string) (helperBinary, error) {
	if err := helper.CheckStatic(path); err != nil {
		return helperBinary{}, err
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return helperBinary{}, fmt.Errorf("read the helper binary: %w", err)
	}
	sum := sha256.Sum256(b)
	return helperBinary{data: b, hash: hex.EncodeToString(sum[:])[:12]}, nil
}

// chunks cuts the binary into config-map-sized pieces.
func (h helperBinary) chunks() [][]byte {
	var out [][]byte
	for b := h.data; len(b) > 0; {
		n := min(len(b), chunkSize)
		out = append(out, b[:n])
		b = b[n:]
	}
	return out
}

func chunkName(hash string, i int) string { return fmt.Sprintf("shiro-helper-%s-%d", hash, i) }

// chunkConfigMap is the config map of chunk i.
func chunkConfigMap(key []byte, ns string, h helperBinary, i int, data []byte) *corev1.ConfigMap {
	name := chunkName(h.hash, i)
	return &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{
			Name:      name,
			Namespace: ns,
			Labels: map[string]string{
				LabelManaged: "true",
				LabelHelper:  h.hash,
				LabelOwner:   owner.Token(key, "configmap", name, "", h.hash),
			},
		},
		Immutable:  ptr(true),
		BinaryData: map[string][]byte{chunkKey: data},
	}
}

// ensureChunks makes the helper's config maps that are missing. One that
// exists is used only when it holds exactly the chunk (whoever made it):
// what the pods run is the binary whose hash names it.
func (c *Cluster) ensureChunks(ctx context.Context, h helperBinary) error {
	api := c.cs.CoreV1().ConfigMaps(c.ns)
	for i, data := range h.chunks() {
		want := chunkConfigMap(c.key, c.ns, h, i, data)
		got, err := api.Get(ctx, want.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			got, err = api.Create(ctx, want, metav1.CreateOptions{})
			if apierrors.IsAlreadyExists(err) { // another shiro made it meanwhile
				got, err = api.Get(ctx, want.Name, metav1.GetOptions{})
			}
		}
		if err != nil {
			return fmt.Errorf("deliver the helper (config map %s): %w", want.Name, err)
		}
		if !bytes.Equal(got.BinaryData[chunkKey], data) || len(got.Data) > 0 || len(got.BinaryData) != 1 {
			return fmt.Errorf("the config map %s exists but does not hold the helper's bytes; remove it (kubectl delete configmap %s -n %s)", want.Name, want.Name, c.ns)
		}
	}
	return nil
}
