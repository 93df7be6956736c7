/*
 * The exported dlsym (both glibc versions). glibc resolves RTLD_NEXT
 * relative to its caller's return address, so this entry must not call the
 * real dlsym: it asks nvs_dlsym_policy() (C) whether to substitute, and
 * either returns the wrapper or jumps into glibc's dlsym with the original
 * arguments and the original return address.
 *
 *   void *nvs_dlsym_policy(void *handle, const char *name, void *caller)
 *     returns our wrapper, or NULL for "pass through"; it also makes sure
 *     nvs_dlsym_glibc is resolved.
 */
#if defined(__x86_64__)

	.text
	.p2align 4
	.globl	nvs_dlsym_v2_2_5
	.globl	nvs_dlsym_v2_34
	.type	nvs_dlsym_v2_2_5, @function
	.type	nvs_dlsym_v2_34, @function
nvs_dlsym_v2_2_5:
nvs_dlsym_v2_34:
	.cfi_startproc
	endbr64
	pushq	%rdi
	.cfi_adjust_cfa_offset 8
	pushq	%rsi
	.cfi_adjust_cfa_offset 8
	subq	$8, %rsp		/* 16-byte alignment for the call */
	.cfi_adjust_cfa_offset 8
	movq	24(%rsp), %rdx		/* caller's return address */
	call	nvs_dlsym_policy
	addq	$8, %rsp
	.cfi_adjust_cfa_offset -8
	popq	%rsi
	.cfi_adjust_cfa_offset -8
	popq	%rdi
	.cfi_adjust_cfa_offset -8
	testq	%rax, %rax
	jz	1f
	ret
1:	jmp	*nvs_dlsym_glibc(%rip)	/* tail-jump: caller preserved */
	.cfi_endproc
	.size	nvs_dlsym_v2_2_5, .-nvs_dlsym_v2_2_5
	.size	nvs_dlsym_v2_34, .-nvs_dlsym_v2_34

	.symver	nvs_dlsym_v2_2_5, dlsym@GLIBC_2.2.5
	.symver	nvs_dlsym_v2_34, dlsym@@GLIBC_2.34

#elif defined(__aarch64__)

	.text
	.p2align 4
	.globl	nvs_dlsym_v2_17
	.globl	nvs_dlsym_v2_34
	.type	nvs_dlsym_v2_17, %function
	.type	nvs_dlsym_v2_34, %function
nvs_dlsym_v2_17:
nvs_dlsym_v2_34:
	.cfi_startproc
	hint	#34			/* bti c */
	stp	x29, x30, [sp, #-32]!
	.cfi_def_cfa_offset 32
	.cfi_offset 29, -32
	.cfi_offset 30, -24
	mov	x29, sp
	stp	x0, x1, [sp, #16]
	mov	x2, x30			/* caller's return address */
	bl	nvs_dlsym_policy
	mov	x16, x0
	ldp	x0, x1, [sp, #16]
	ldp	x29, x30, [sp], #32
	.cfi_def_cfa_offset 0
	cbz	x16, 1f
	mov	x0, x16
	ret
1:	adrp	x16, nvs_dlsym_glibc
	ldr	x16, [x16, #:lo12:nvs_dlsym_glibc]
	br	x16			/* tail-jump: x30 is the caller's */
	.cfi_endproc
	.size	nvs_dlsym_v2_17, .-nvs_dlsym_v2_17
	.size	nvs_dlsym_v2_34, .-nvs_dlsym_v2_34

	.symver	nvs_dlsym_v2_17, dlsym@GLIBC_2.17
	.symver	nvs_dlsym_v2_34, dlsym@@GLIBC_2.34

#else
#error "libnvshare: dlsym entry not written for this architecture"
#endif

	.section .note.GNU-stack,"",%progbits
