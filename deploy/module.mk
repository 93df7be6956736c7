# deploy/: container images built from the artifacts of `make` (see
# deploy/images/Containerfile.* and docs/kubernetes.md). Not part of `all`.
#
#   make images                      the three images for this machine's arch
#   make images-push REGISTRY=R      build, then push R/nvshare/<image>:<tag>
#   make deploy-images REGISTRY=R    point deploy/kubernetes at those images
#   make image-scheduler | image-device-plugin | image-library
#   make image-stage                 only stage the build contexts
#   make images-multiarch            docker buildx, PLATFORMS, --push
#
#   CONTAINER_TOOL  buildah (default when installed, `build` subcommand),
#                   else docker; podman works too
#   REGISTRY        registry host[/path] the images go to (default none:
#                   local names localhost/nvshare/scheduler...)
#   IMAGE_REPO      image name prefix (default REGISTRY/nvshare, or
#                   localhost/nvshare: a name no registry serves, so that
#                   nothing is ever pulled from a namespace we do not own)
#   IMAGE_TAG       default: the release in VERSION, as the kustomize base
#                   (deploy/kubernetes/kustomization.yaml) names it
#   IMAGE_BASE      base image (default debian:bookworm-slim; glibc >= 2.36)
#   IMAGE_ARCH      Debian arch of the artifacts in $(B) (default: this host)
#   IMAGE_CONTEXT   build contexts, shared by all archs (default build/images)

CONTAINER_TOOL ?= $(if $(shell command -v buildah 2>/dev/null),buildah,docker)
REGISTRY ?=
IMAGE_REPO ?= $(if $(REGISTRY),$(REGISTRY:%/=%)/nvshare,localhost/nvshare)
IMAGE_TAG ?= $(shell tr -d ' \t\r\n' <VERSION)
IMAGE_REVISION ?= $(or $(shell git rev-parse HEAD 2>/dev/null),unknown)
IMAGE_BASE ?= debian:bookworm-slim
IMAGE_ARCH ?= $(shell dpkg --print-architecture 2>/dev/null || echo amd64)
IMAGE_CONTEXT ?= build/images
PLATFORMS ?= linux/amd64,linux/arm64
IMAGES := scheduler device-plugin library
IMAGE_STAGED := $(IMAGES:%=$(IMAGE_CONTEXT)/%/.staged-$(IMAGE_ARCH))

.PHONY: images images-push deploy-images image-stage images-multiarch print-image-tag $(IMAGES:%=image-%)

$(IMAGE_CONTEXT)/scheduler/.staged-$(IMAGE_ARCH): $(B)/nvshare-scheduler $(B)/nvsharectl \
		deploy/images/stage.sh
	deploy/images/stage.sh $(IMAGE_CONTEXT)/scheduler $(IMAGE_ARCH) \
		$(B)/nvshare-scheduler:/usr/local/bin/ $(B)/nvsharectl:/usr/local/bin/
	@touch $@

# The device plugin's image also carries the DRA driver (same libraries;
# components/dra runs it with command: nvshare-dra-plugin).
$(IMAGE_CONTEXT)/device-plugin/.staged-$(IMAGE_ARCH): $(B)/nvshare-device-plugin \
		$(B)/nvshare-dra-plugin deploy/images/stage.sh
	deploy/images/stage.sh $(IMAGE_CONTEXT)/device-plugin $(IMAGE_ARCH) \
		$(B)/nvshare-device-plugin:/usr/local/bin/ $(B)/nvshare-dra-plugin:/usr/local/bin/
	@touch $@

# The library goes into arbitrary containers: it must need nothing but glibc,
# so no dependencies are staged with it.
$(IMAGE_CONTEXT)/library/.staged-$(IMAGE_ARCH): $(B)/libnvshare.so deploy/images/install-library.sh \
		deploy/images/stage.sh $(NVS_VERSION_H)
	@mkdir -p $(IMAGE_CONTEXT)/library
	scripts/gen-version.sh --print >$(IMAGE_CONTEXT)/library/VERSION
	deploy/images/stage.sh --no-deps $(IMAGE_CONTEXT)/library $(IMAGE_ARCH) \
		$(B)/libnvshare.so:/usr/local/nvshare/lib/ \
		$(IMAGE_CONTEXT)/library/VERSION:/usr/local/nvshare/VERSION \
		deploy/images/install-library.sh:/usr/local/bin/nvshare-install-library
	@touch $@

image-stage: $(IMAGE_STAGED)

$(IMAGES:%=image-%): image-%: $(IMAGE_CONTEXT)/%/.staged-$(IMAGE_ARCH)
	$(CONTAINER_TOOL) build --build-arg BASE=$(IMAGE_BASE) --build-arg TARGETARCH=$(IMAGE_ARCH) \
		--build-arg VERSION=$(IMAGE_TAG) --build-arg REVISION=$(IMAGE_REVISION) \
		-f deploy/images/Containerfile.$* -t $(IMAGE_REPO)/$*:$(IMAGE_TAG) $(IMAGE_CONTEXT)/$*

images: $(IMAGES:%=image-%)
	@echo "built: $(foreach i,$(IMAGES),$(IMAGE_REPO)/$(i):$(IMAGE_TAG))"

# Pushes what `images` built under the same names. Then point the manifests
# at them: docs/kubernetes.md, "Install" (kustomize edit set image).
# Checked before anything is built: without a registry the push would go
# to docker.io/nvshare, which is not ours.
ifneq ($(filter images-push,$(MAKECMDGOALS)),)
ifeq ($(REGISTRY),)
$(error images-push: set REGISTRY, e.g. make images-push REGISTRY=registry.example.com/team)
endif
endif
images-push: images
	for i in $(IMAGES); do $(CONTAINER_TOOL) push $(IMAGE_REPO)/$$i:$(IMAGE_TAG) || exit 1; done

# Points the kustomize base's images: list at REGISTRY (and IMAGE_TAG):
# what `kustomize edit set image` would do, without needing kustomize.
KUSTOMIZATION := deploy/kubernetes/kustomization.yaml
deploy-images:
	@test -n "$(REGISTRY)" || { echo "deploy-images: set REGISTRY" >&2; exit 1; }
	sed -i -E -e 's#^( *newName: *).*/?nvshare/([a-z-]+)$$#\1$(IMAGE_REPO)/\2#' \
		-e 's#^( *newTag: *).*#\1"$(IMAGE_TAG)"#' $(KUSTOMIZATION)
	@grep -E '^ *new(Name|Tag):' $(KUSTOMIZATION)

print-image-tag:
	@echo $(IMAGE_TAG)

# Every platform's artifacts must be staged in $(IMAGE_CONTEXT) first, e.g.
# on an arm64 machine (or with an aarch64 cross compiler and arm64 -dev
# packages): make B=build-arm64 IMAGE_ARCH=arm64 image-stage, then copy
# build/images/*/rootfs-arm64 here. Not run in CI.
images-multiarch:
	@for i in $(IMAGES); do for p in $(subst $(comma), ,$(PLATFORMS)); do \
		a=$${p#*/}; test -d $(IMAGE_CONTEXT)/$$i/rootfs-$$a || { \
		echo "$(IMAGE_CONTEXT)/$$i/rootfs-$$a missing: stage $$a artifacts first (see deploy/module.mk)" >&2; \
		exit 1; }; done; done
	for i in $(IMAGES); do \
		docker buildx build --platform $(PLATFORMS) --build-arg BASE=$(IMAGE_BASE) \
			--build-arg VERSION=$(IMAGE_TAG) --build-arg REVISION=$(IMAGE_REVISION) \
			-f deploy/images/Containerfile.$$i -t $(IMAGE_REPO)/$$i:$(IMAGE_TAG) --push \
			$(IMAGE_CONTEXT)/$$i || exit 1; \
	done
comma := ,
