# %% [markdown]
# # crossed_audit

# %%
print(1)
