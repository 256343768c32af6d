# %% [markdown]
# # quickstart

# %%
print(1)
